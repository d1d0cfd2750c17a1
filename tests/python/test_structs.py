"""The ctypes mirrors of the public structs the library fills (python/netvm/_lib.py)
name the same fields, in the same order, as the C headers. A struct that grew in C
and not here makes the library write past the Python object (as
netvm_gmem_stats_t's resident_peak, wp_faults and placed_dirty once did: a
segmentation fault tests later)."""
import importlib
import os
import re

import pytest

_lib = importlib.import_module("netvm._lib")   # the module (netvm._lib the name is the library)

HEADERS = os.path.join(os.path.dirname(__file__), "..", "..", "include", "netvm")

MIRRORS = [
    ("GmemStats", "gmem.h", "netvm_gmem_stats_t"),
    ("GmemHealth", "gmem.h", "netvm_gmem_health_t"),
    ("GmemOpts", "gmem.h", "netvm_gmem_opts_t"),
    ("Event", "events.h", "netvm_event_t"),
    ("AmToken", "am.h", "netvm_am_token_t"),
    ("AmMsg", "am.h", "netvm_am_msg_t"),
    ("AmResult", "am.h", "netvm_am_result_t"),
]


def c_fields(header, typedef):
    """Field names of `typedef struct { ... } typedef;` in header, in order."""
    with open(os.path.join(HEADERS, header)) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    m = re.search(r"typedef struct\s*\{([^{}]*)\}\s*" + typedef + r"\s*;", text)
    assert m, f"{typedef} not found in {header}"
    names = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if not decl:
            continue
        for part in decl.split(","):       # "int a, b" declares two
            part = re.sub(r"\[.*?\]", "", part).strip()
            names.append(re.findall(r"[A-Za-z_]\w*", part)[-1])
    return names


@pytest.mark.parametrize("py,header,typedef", MIRRORS)
def test_ctypes_mirror_matches_header(py, header, typedef):
    mine = [f[0] for f in getattr(_lib, py)._fields_]
    assert mine == c_fields(header, typedef), f"python/netvm/_lib.py {py} differs from {typedef}"
