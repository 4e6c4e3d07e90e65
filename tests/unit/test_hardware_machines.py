"""Telling machines apart: :func:`actorq.hardware.machine_groups` and the folder name :func:`machine_slug` gives."""

from __future__ import annotations

import re

from actorq.hardware import cpu_info, machine_differences, machine_groups, machine_slug

ZEN3 = {
    "model": "AMD EPYC",
    "arch": "x86_64",
    "cores": 2,
    "flags": {"avx2": True, "fma": True, "avx512f": False, "avx512_vnni": False},
    "l2_bytes": 524288,
    "l3_bytes": 33554432,
    "isa_limit": {},
}
ZEN4 = {**ZEN3, "flags": {**ZEN3["flags"], "avx512f": True, "avx512_vnni": True}, "l2_bytes": 1048576}
ZEN2 = {**ZEN3, "l3_bytes": 16777216}  # also "AMD EPYC", AVX2, L2 512 KiB on these VMs: only L3 tells


def test_slugs_are_folder_names_that_differ_exactly_where_machines_do():
    slugs = {name: machine_slug(info) for name, info in (("zen2", ZEN2), ("zen3", ZEN3), ("zen4", ZEN4))}
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s) for s in slugs.values()), slugs
    assert slugs["zen3"].startswith("amd-epyc-2c-avx2-") and slugs["zen4"].startswith(
        "amd-epyc-2c-avx512-vnni-"
    )
    assert len(set(slugs.values())) == 3  # one model name, three machines, three folders
    older = {**ZEN3, "flags": {"avx2": True, "fma": True}, "dram_read_gbs": 5.0}  # fewer flags listed as off
    assert machine_differences(ZEN3, older) == [] and machine_slug(older) == slugs["zen3"]
    xeon = {**ZEN4, "model": "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "flags": {"amx_int8": True}}
    assert machine_slug(xeon).startswith("intel-xeon-platinum-8481c-2c-amx-int8-")
    assert machine_slug() == machine_slug(cpu_info())


def test_machine_groups_put_records_of_one_machine_together_in_order():
    older = {**ZEN3, "flags": {"avx2": True, "fma": True}}
    groups = machine_groups([ZEN3, ZEN4, older, {}, ZEN4])
    assert [members for _, members in groups] == [[0, 2], [1, 4], [3]]
    assert groups[1][0] is ZEN4
