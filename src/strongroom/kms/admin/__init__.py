"""KEK administration twins of the providers: create, rotate, disable, delete KEKs.

The KMS interface is what strongroom *uses*; these are what tests, the demo and runbooks use to put
a KEK into each state (the "test-support twin" of every provider). Each provider's admin lives in
its own module and needs that provider's client library and administrative credentials.

Not every KMS has every state; the capability flags say what is real:

* ``can_disable``: the whole key can be disabled and later enabled (AWS, local). Vault/OpenBao
  Transit has no such state; its twin emulates "disabled" by raising ``min_decryption_version``
  past every existing key version (old EDEKs are refused as "disallowed by policy", new DEKs
  still work) — the closest real Transit behaviour, undone by lowering it again.
* ``can_delete_now``: immediate, permanent deletion (Vault/OpenBao, local). AWS only schedules.
* ``enforces_states``: the server refuses disabled / pending-deletion keys. True for real
  servers; False for moto, which keeps decrypting (tests skip those cases there).
"""

from strongroom.kms.admin.base import KekAdmin

__all__ = ["KekAdmin"]
