"""Isolation by construction: every attempt and its grading run in a box of a Sandbox backend.

    port.py        the Sandbox port: ``Sandbox`` (a backend) makes ``Box`` es; how to use and
                   implement it is that module's docstring
    registry.py    the backends by name (``bwrap``, ``none``, ``podman``, ``docker``), their
                   ``modes()`` and how ``--sandbox auto|container|NAME`` resolves on this machine
    container/     the container backend (podman, docker): engines, images, boxes
    bubblewrap.py  the ``bwrap`` backend: boxes made of bubblewrap
    local.py       the ``none`` backend: ordinary processes, nothing confined
    preflight.py   ``ledger run``'s pre-flight: the agent's box started once, through the port
    paths.py       all host path knowledge: system folders and links, install trees, shims,
                   launchers, the harness's interpreter and package, what is always hidden
    policy.py      SandboxPolicy: what a bubblewrap box shows (binds, masks, network), as data
    attempt_boxes.py  the agent's and the grading policy of one attempt, the proxy wiring,
                   each command's inside (``inner_command``)
    bwrap.py       the one bwrap command line built from a policy; availability probe
    net.py         the attempt's journaling proxy on a unix socket; forwarder.py runs inside
    grading.py     which of the agent's changes are graded; the fresh grading tree
    outcomes.py    the harness's pytest reporter and signal wrapper, over an inherited pipe
    fanotify.py    file opens of a bubblewrap box seen by the kernel, without stopping the agent
    tracelog.py    the strace log of a sandboxed agent: bwrap's own set-up cut off; partial traces
    limits.py      resource limits of every attempt: cgroups or rlimits, the disk walk, hits
"""

from ledger.sandbox.bwrap import (
    INSTALL_HINT,
    bwrap_command,
    probe_bwrap,
    sandbox_status,
)
from ledger.sandbox.policy import PolicyRequest, SandboxPolicy, build_policy, install_tree
from ledger.sandbox.port import (
    AgentRequest,
    Availability,
    Box,
    BoxRecords,
    BoxStartFailed,
    Confined,
    GradingRequest,
    Sandbox,
    SandboxStatus,
)
from ledger.sandbox.registry import get, modes, names, register, resolve

__all__ = ["INSTALL_HINT", "AgentRequest", "Availability", "Box", "BoxRecords",
           "BoxStartFailed", "Confined", "GradingRequest", "PolicyRequest", "Sandbox",
           "SandboxPolicy", "SandboxStatus", "build_policy", "bwrap_command", "get",
           "install_tree", "modes", "names", "probe_bwrap", "register", "resolve",
           "sandbox_status"]
