"""Doctor's errors: why a check could not run, each with the operator's next step."""

from __future__ import annotations

from strongroom.errors import DoctorError


class ClusterUnreachable(DoctorError):
    """No broker answered within the timeout (wrong address, network, firewall, TLS mismatch)."""

    default_hint = "check --bootstrap-server and network"


class ClusterAuthenticationFailed(DoctorError):
    """A broker rejected the credentials from --command-config."""

    default_hint = "check sasl.mechanism, sasl.username and sasl.password in --command-config"


class ClusterAccessDenied(DoctorError):
    """Authenticated, but not authorised to describe the cluster, topics or configs."""

    default_hint = "grant the principal Describe and DescribeConfigs on the cluster and topics"


class CommandConfigError(DoctorError):
    """The --command-config file cannot be read or holds properties librdkafka rejects."""

    default_hint = "fix the property named above in --command-config"


class ClientConfigFileError(DoctorError):
    """The client configuration file given to ``doctor client`` cannot be read."""

    default_hint = "check the --config path"
