"""Several KMSes in one file: the catalog of a rules file's ``kms:`` section, and the group readers use."""

from __future__ import annotations

from pathlib import Path

import pytest

from strongroom.kms.admin.local import LocalKekAdmin
from strongroom.kms.catalog import KmsCatalog, KmsGroup
from strongroom.kms.errors import EdekInvalid, KekNotFound, KmsConfigError
from strongroom.kms.local import LocalKms


def _ring(tmp_path: Path, name: str) -> dict[str, object]:
    return {"provider": "local", "path": str(tmp_path / f"{name}.json"), "create": True}


def test_entries_are_named_by_their_key_and_built_into_kmses(tmp_path: Path) -> None:
    catalog = KmsCatalog({"eu": _ring(tmp_path, "eu"), "us": {**_ring(tmp_path, "us"), "name": "us-ring"}})
    assert catalog.names() == ["eu", "us"]
    built = catalog.build(cache=False)
    assert {name: kms.name for name, kms in built.items()} == {"eu": "eu", "us": "us-ring"}
    assert catalog.config("eu")["name"] == "eu"


def test_the_catalog_never_shows_its_settings(tmp_path: Path) -> None:
    catalog = KmsCatalog({"bao": {"provider": "vault", "address": "http://127.0.0.1:1", "token": "s3cr3t"}})
    assert "s3cr3t" not in repr(catalog)
    assert "s3cr3t" not in str(catalog)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"a b": {"provider": "local"}}, "is not 1-64 letters"),
        ({"eu": "vault"}, "is not a KMS settings mapping with a provider"),
        ({"eu": {"path": "x"}}, "with a provider"),
    ],
)
def test_bad_entries_are_refused_by_name(section: dict[str, object], message: str) -> None:
    with pytest.raises(KmsConfigError, match=message):
        KmsCatalog(section)  # type: ignore[arg-type]


def test_a_file_without_a_kms_section_gives_an_empty_catalog(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - {topic: orders}\n")
    assert not KmsCatalog.load(path)
    path.write_text("kms: [1, 2]\nrules: []\n")
    with pytest.raises(KmsConfigError, match="must map names"):
        KmsCatalog.load(path)
    path.write_text("kms: {bao: {provider: vault, token: 's3cr3t\n")
    with pytest.raises(KmsConfigError) as caught:
        KmsCatalog.load(path)
    assert "s3cr3t" not in str(caught.value)  # a syntax error names the position, never the text


def test_a_group_unwraps_each_edek_with_the_kms_it_names(tmp_path: Path) -> None:
    kmses = KmsCatalog({"eu": _ring(tmp_path, "eu"), "us": _ring(tmp_path, "us")}).build(cache=False, retry=False)
    group = KmsGroup(kmses.values())
    eu_kek = LocalKekAdmin(kmses["eu"]).create_kek("k")  # type: ignore[arg-type]
    us_kek = LocalKekAdmin(kmses["us"]).create_kek("k")  # type: ignore[arg-type]
    edeks = [kmses["eu"].wrap(eu_kek, b"e" * 32), kmses["us"].wrap(us_kek, b"u" * 32)]
    stranger = LocalKms.from_config({"path": str(tmp_path / "x.json"), "create": True, "name": "x"})
    x_kek = LocalKekAdmin(stranger).create_kek("k")
    edeks.append(stranger.wrap(x_kek, b"x" * 32))
    LocalKekAdmin(kmses["us"]).delete_kek(us_kek)  # type: ignore[arg-type]
    eu, us, x = group.unwrap_many(edeks)
    assert eu == b"e" * 32
    assert isinstance(us, KekNotFound)
    assert isinstance(x, EdekInvalid)
    with pytest.raises(KmsConfigError, match="share the provider name"):
        KmsGroup(
            [kmses["eu"], LocalKms.from_config({"path": str(tmp_path / "eu2.json"), "create": True, "name": "eu"})]
        )


def test_every_metered_kms_of_a_catalog_is_exported_once(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from strongroom.kms.metered import watch_metered
    from strongroom.metrics import metrics_for

    kmses = KmsCatalog({"eu": _ring(tmp_path, "eu"), "us": _ring(tmp_path, "us")}).build(metrics=True, cache=False)
    registry = CollectorRegistry()
    watch_metered(metrics_for(registry), [None, kmses["eu"], *kmses.values()])
    for kms in kmses.values():
        kms.describe_kek("nothing")
    text = generate_latest(registry).decode()
    calls = [line for line in text.splitlines() if line.startswith("strongroom_kms_calls_total{")]
    assert sorted(line.split("}")[0] for line in calls) == [
        'strongroom_kms_calls_total{operation="describe_kek",provider="eu"',
        'strongroom_kms_calls_total{operation="describe_kek",provider="us"',
    ]
