"""Keep SLURM's daemons on 127.0.0.1.

slurmctld, slurmdbd and slurmd always bind their ports to all interfaces (22.05 ignores the
address it is given: `slurm_init_msg_engine_addrname_port` binds INADDR_ANY) and no setting
changes that. A tiny LD_PRELOAD library rewrites a bind to the wildcard address into a bind to
loopback, for those daemons and the slurmstepd they start. Job tasks do not inherit it:
slurmstepd starts them with the job's own environment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from hpcscale.model.errors import BackendError, HpcscaleError

# What a bind to the IPv6 wildcard becomes: `::1` for SLURM's daemons; refused for torch's
# rendezvous store, which then binds IPv4 (its clients dial 127.0.0.1, where `::1` has no server).
IPV6 = {
    "loopback": "a.sin6_addr = in6addr_loopback;\n"
    "            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);",
    "refuse": "errno = EADDRNOTAVAIL;\n            return -1;",
}
TEMPLATE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
            IPV6_WILDCARD
        }
    }
    return real_bind(fd, addr, len);
}
"""


def shim(lib_dir: Path, ipv6: str = "loopback") -> Path:
    """The compiled library (built once per source version, ~0.1 s); `ipv6`: see IPV6."""
    source = TEMPLATE.replace("IPV6_WILDCARD", IPV6[ipv6])
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    lib = lib_dir / f"loopback-{digest}.so"
    if lib.exists():
        return lib
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise HpcscaleError(
            "a C compiler (cc) is needed to keep the local SLURM on 127.0.0.1; run `make setup`"
        )
    lib_dir.mkdir(parents=True, exist_ok=True)
    src = lib_dir / f"loopback-{digest}.c"
    src.write_text(source)
    tmp = lib.with_name(f".{lib.name}.{os.getpid()}")
    res = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(src), "-ldl"],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        raise BackendError(f"compiling {src} failed:\n{res.stderr.strip()}")
    os.replace(tmp, lib)
    return lib
