"""Isolation by construction: every attempt and its grading run in a bubblewrap sandbox.

    paths.py     host path knowledge: system folders and links, install trees, shims, launchers
    policy.py    SandboxPolicy: what a sandbox shows (binds, masks, network), recorded as data
    bwrap.py     the one bwrap command line built from a policy; availability probe
    grading.py   which of the agent's changes are graded; the fresh grading tree
    tracelog.py  the strace log of a sandboxed agent: bwrap's own set-up cut off; partial traces
    limits.py    resource limits of every attempt: cgroups or rlimits, the disk walk, hits
"""

from ledger.sandbox.bwrap import (
    INSTALL_HINT,
    SANDBOX_MODES,
    SandboxStatus,
    bwrap_command,
    probe_bwrap,
    sandbox_status,
)
from ledger.sandbox.policy import PolicyRequest, SandboxPolicy, build_policy, install_tree

__all__ = ["INSTALL_HINT", "SANDBOX_MODES", "PolicyRequest", "SandboxPolicy", "SandboxStatus",
           "build_policy", "bwrap_command", "install_tree", "probe_bwrap", "sandbox_status"]
