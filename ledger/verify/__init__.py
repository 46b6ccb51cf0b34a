"""Verification as a library object: ``Verifier`` runs a policy of composable checks against a
journal or a bundle and returns a typed ``Verification`` or raises (one error channel; see
``ledger/verify/verifier.py``). ``steps.py`` the typed records each check returns,
``attestations.py`` an attestation entry checked against its journal or bundle, ``previous.py``
the comparison with the previous run of the same tasks that ``ledger run`` prints.

``ledger verify`` (cli/journal_cmds.py) parses, calls ``verify`` once and renders the steps
(cli/verify_render.py).
"""

from ledger.verify.steps import Verification
from ledger.verify.verifier import (
    AuditRuns,
    Bundle,
    BundleCoverage,
    BundleSignature,
    Check,
    Context,
    FindingsError,
    JournalIntegrity,
    RememberCheckpoint,
    Target,
    Verifier,
    VerifyOptions,
    WitnessCosignatures,
    bundle_policy,
    journal_policy,
    verify,
)

__all__ = [
    "AuditRuns", "Bundle", "BundleCoverage", "BundleSignature", "Check", "Context", "FindingsError",
    "JournalIntegrity", "RememberCheckpoint", "Target", "Verification", "Verifier", "VerifyOptions",
    "WitnessCosignatures", "bundle_policy", "journal_policy", "verify",
]
