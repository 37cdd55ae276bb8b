# strongroom: the README's two commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' src/strongroom/resources/kafka-pom.xml)
STRONGROOM_CACHE ?= $(HOME)/.cache/strongroom
KAFKA_STAMP := $(STRONGROOM_CACHE)/kafka-$(KAFKA_VERSION)/libs/.complete
DEPS_STAMP := $(VENV)/.stamp-deps
SPARK_STAMP := $(VENV)/.stamp-spark-connector
PYTEST_ARGS ?=
# The JVM data plane (java/, docs/architecture.md "JVM data plane"): plain javac + jar against PySpark's jars
# and the Kafka connector's kafka-clients. -Xlint:path is off because PySpark's own jars name missing jars in
# their manifests; every other warning is an error.
DATAPLANE_JAR := build/strongroom-dataplane.jar
DATAPLANE_CLASSES := build/dataplane-classes
JAVA_SOURCES := $(shell find java/src/main/java -name '*.java' 2>/dev/null | LC_ALL=C sort)
# A file whose content is the source list, rewritten only when a .java file is added, removed or renamed.
JAVA_SOURCE_LIST := build/dataplane-sources.txt
$(shell mkdir -p build && printf '%s\n' $(JAVA_SOURCES) > $(JAVA_SOURCE_LIST).new && \
  { cmp -s $(JAVA_SOURCE_LIST).new $(JAVA_SOURCE_LIST) && rm -f $(JAVA_SOURCE_LIST).new || mv $(JAVA_SOURCE_LIST).new $(JAVA_SOURCE_LIST); })
JAVAC_FLAGS := --release 17 -encoding UTF-8 -Xlint:all,-path -Werror
# Native AES-256-GCM loops (src/strongroom/crypto/_gcm.c: the consumer's opener, issue 18; new subject keys,
# issue 13; field mode's sealing and opening, issue 18): C against the virtualenv's Python headers and the
# system's OpenSSL 3 (libssl-dev), every warning an error. Field mode's strict JSON reader and canonical writer
# (src/strongroom/envelope/_json_scan.h, in both modules; alone in _canonical.c, issue 18): C against the Python
# headers only. Long-lived cache entries out of the cyclic collector's passes (src/strongroom/_collector.c,
# runtime.untracked): C against the Python headers only.
NATIVE_OPENER := src/strongroom/crypto/_gcm.so
NATIVE_JSON := src/strongroom/envelope/_canonical.so
NATIVE_COLLECTOR := src/strongroom/_collector.so
NATIVE := $(NATIVE_OPENER) $(NATIVE_JSON) $(NATIVE_COLLECTOR)
NATIVE_CFLAGS := -O2 -fPIC -shared -std=c11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror -fvisibility=hidden

.PHONY: all install dataplane system-deps demo test test-unit test-integration check lint typecheck bench clean distclean

all: install

install: $(DEPS_STAMP) $(NATIVE) $(KAFKA_STAMP) $(SPARK_STAMP) $(DATAPLANE_JAR)

# Python dependencies (PySpark, confluent-kafka, cryptography, hvac, boto3, moto, OpenBao's CLI, test tools).
$(DEPS_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "strongroom needs Python >= 3.11")'
	@command -v java >/dev/null || { echo "error: java not found (install a Java 17+ JDK: apt-get install openjdk-17-jdk-headless)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The native AES-GCM loops: rebuilt when their source changes. Needs a C compiler and OpenSSL's headers (libssl-dev).
$(NATIVE_OPENER): src/strongroom/crypto/_gcm.c src/strongroom/envelope/_json_scan.h | $(DEPS_STAMP)
	@command -v cc >/dev/null && [ -f /usr/include/openssl/evp.h ] || { echo "error: a C compiler and OpenSSL's headers are needed (apt-get install gcc libssl-dev)"; exit 1; }
	@include=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])') || exit 1; \
	  echo "cc $< -> $@" && cc $(NATIVE_CFLAGS) -I"$$include" -o $@.tmp $< -lcrypto && mv $@.tmp $@

$(NATIVE_JSON): src/strongroom/envelope/_canonical.c src/strongroom/envelope/_json_scan.h | $(DEPS_STAMP)
$(NATIVE_COLLECTOR): src/strongroom/_collector.c | $(DEPS_STAMP)
$(NATIVE_JSON) $(NATIVE_COLLECTOR):
	@command -v cc >/dev/null || { echo "error: a C compiler is needed (apt-get install gcc)"; exit 1; }
	@include=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])') || exit 1; \
	  echo "cc $< -> $@" && cc $(NATIVE_CFLAGS) -I"$$include" -o $@.tmp $< && mv $@.tmp $@

# Apache Kafka broker + tools jars from Maven Central (cached under $(STRONGROOM_CACHE)).
$(KAFKA_STAMP): src/strongroom/resources/kafka-pom.xml | $(DEPS_STAMP)
	@command -v mvn >/dev/null || { echo "error: mvn not found (install Maven: apt-get install maven)"; exit 1; }
	$(BIN)/python -m strongroom.testing.kafka_dist

# Spark's Kafka connector (spark-sql-kafka-0-10 matching PySpark) and the schema-mode libraries into the Ivy cache.
$(SPARK_STAMP): $(DEPS_STAMP) src/strongroom/resources/ivysettings.xml src/strongroom/spark/dataplane.py
	$(BIN)/python -m strongroom.spark.session
	touch $@

# The JVM data plane jar: rebuilt when a .java file (or the list of them) changes. Needs a JDK (javac, jar) and
# the connector's kafka-clients in the Ivy cache, which the Spark step above fills.
dataplane: $(DATAPLANE_JAR)

$(DATAPLANE_JAR): $(JAVA_SOURCES) $(JAVA_SOURCE_LIST) $(SPARK_STAMP) src/strongroom/spark/dataplane.py
	@command -v javac >/dev/null && command -v jar >/dev/null || { echo "error: javac/jar not found (install a Java 17 JDK: apt-get install openjdk-17-jdk-headless)"; exit 1; }
	@classpath=$$($(BIN)/python -m strongroom.spark.dataplane classpath) || exit 1; \
	  rm -rf $(DATAPLANE_CLASSES) && mkdir -p $(DATAPLANE_CLASSES) && \
	  echo "javac $(words $(JAVA_SOURCES)) files -> $@" && \
	  javac $(JAVAC_FLAGS) -cp "$$classpath" -d $(DATAPLANE_CLASSES) $(JAVA_SOURCES)
	jar --create --file $@.tmp -C $(DATAPLANE_CLASSES) . && mv $@.tmp $@

# Debian packages beyond Python, Java and Maven: Chromium renders the audit report in a test (headless).
system-deps:
	@command -v chromium >/dev/null || { echo "installing chromium (headless rendering test of the audit report)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || { $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; }

# The demo fails if it printed a raw librdkafka line or a deprecation banner (a newcomer must never see one).
demo: install
	$(BIN)/python -m strongroom.testing.quiet_run $(BIN)/strongroom demo

# The slowest tests are listed at the end of every full run: where the next saving of CI's time is.
test: install system-deps check
	$(BIN)/pytest --durations=25 $(PYTEST_ARGS)

test-unit: $(DEPS_STAMP) $(NATIVE)
	$(BIN)/pytest -m "not integration" $(PYTEST_ARGS)

test-integration: install
	$(BIN)/pytest -m integration --durations=25 $(PYTEST_ARGS)

check: lint typecheck

lint: $(DEPS_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(DEPS_STAMP)
	$(BIN)/mypy

bench: install
	@for b in bench/*_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build dist src/*.egg-info spark-warehouse metastore_db $(NATIVE)

distclean: clean
	rm -rf $(VENV)
