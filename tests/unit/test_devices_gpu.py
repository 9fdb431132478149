"""GPU discovery and assignment without a GPU: fake ``nvidia-smi`` programs on PATH.

Each fake prints what a real nvidia-smi prints for ``--query-gpu=...`` and ``-L`` on the
machine it stands for; discovery must then see what CUDA would see for each form of
CUDA_VISIBLE_DEVICES (indices, GPU- UUIDs and prefixes, MIG- UUIDs, empty, unset) and
CUDA_DEVICE_ORDER, and hand each xdist worker the right GPUs.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from pytest_dlconform.core import devices

H200 = [  # (index, uuid, bus id, name, compute capability), nvidia-smi's PCI bus order
    ("0", "GPU-1a2b3c4d-0000-1111-2222-333344445555", "00000000:1B:00.0", "NVIDIA H200", "9.0"),
    ("1", "GPU-9f8e7d6c-0000-1111-2222-333344445555", "00000000:3B:00.0", "NVIDIA H200", "9.0"),
]
MIXED = [  # a slow GPU on the lower bus id: CUDA's default order puts the fast one first
    ("0", "GPU-aaaa0000-0000-0000-0000-000000000000", "00000000:1B:00.0", "Tesla T4", "7.5"),
    ("1", "GPU-bbbb0000-0000-0000-0000-000000000000", "00000000:3B:00.0", "NVIDIA A100-SXM4-40GB", "8.0"),
]
MIG_GPU = [("0", "GPU-cccc0000-0000-0000-0000-000000000000", "00000000:1B:00.0", "NVIDIA A100-SXM4-40GB", "8.0")]
MIGS = ["MIG-11110000-0000-0000-0000-000000000000", "MIG-22220000-0000-0000-0000-000000000000"]


def eight() -> list[tuple[str, str, str, str, str]]:
    return [(str(i), f"GPU-{i:08x}-0000-0000-0000-000000000000", f"00000000:{0x10 + i:02X}:00.0", "NVIDIA H100", "9.0")
            for i in range(8)]


def fake_smi(tmp_path: Path, gpus, migs: dict[str, list[str]] | None = None, *, old_driver: bool = False) -> dict[str, str]:
    """A directory with an nvidia-smi script for ``gpus``; returns an env with it on PATH."""
    query = "\n".join(", ".join(g if not old_driver else g[:4]) for g in gpus)
    listing = []
    for i, g in enumerate(gpus):
        listing.append(f"GPU {i}: {g[3]} (UUID: {g[1]})")
        for k, m in enumerate((migs or {}).get(g[1], [])):
            listing.append(f"  MIG 1g.5gb     Device  {k}: (UUID: {m})")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    reject = 'case "$1" in *compute_cap*) echo "Field \\"compute_cap\\" is not a valid field to query." >&2; exit 2;; esac\n'
    script.write_text(
        "#!/bin/sh\n" + (reject if old_driver else "")
        + 'if [ "$1" = "-L" ]; then cat <<"X"\n' + "\n".join(listing) + '\nX\nexit 0; fi\n'
        + 'if [ "$#" = 0 ]; then echo "| NVIDIA-SMI 570.86    Driver Version: 570.86    CUDA Version: 12.8 |"; exit 0; fi\n'
        + 'case "$1" in --query-gpu=uuid,memory.total,driver_version) cat <<"X"\n'
        + "\n".join(f"{g[1]}, {80 + i} GiB, 570.86" for i, g in enumerate(gpus)) + '\nX\nexit 0;; esac\n'
        + 'case "$1" in --query-gpu=index,uuid,pci.bus_id,name*) ;; *) echo "unexpected $*" >&2; exit 9;; esac\n'
        + f'cat <<"X"\n{query}\nX\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin"}


def test_no_nvidia_smi_means_no_gpu(tmp_path):
    inv = devices.discover({"PATH": str(tmp_path)})
    assert inv.gpus == () and inv.how == "nvidia-smi not found"


def test_unset_visible_devices_gives_every_gpu_by_uuid_not_by_nvidia_smi_index(tmp_path):
    inv = devices.discover(fake_smi(tmp_path, H200))
    assert inv.gpus == ("NVIDIA H200", "NVIDIA H200")
    # an nvidia-smi index is PCI order, CUDA's default is fastest first: never hand it to CUDA
    assert inv.gpu_ids == (H200[0][1], H200[1][1])
    assert inv.compute_capabilities == ("9.0", "9.0")


def test_old_driver_without_compute_cap_field_still_finds_the_gpus(tmp_path):
    inv = devices.discover(fake_smi(tmp_path, H200, old_driver=True))
    assert inv.gpus == ("NVIDIA H200", "NVIDIA H200") and inv.compute_capabilities == ("", "")


def test_failing_nvidia_smi_is_reported_as_no_gpu_with_the_reason(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed: driver not loaded' >&2\nexit 9\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    inv = devices.discover({"PATH": str(bin_dir)})
    assert inv.gpus == () and inv.how.startswith("nvidia-smi failed")


@pytest.mark.parametrize("visible, names, ids", [
    ("1", ["NVIDIA H200"], ["1"]),
    ("1,0", ["NVIDIA H200", "NVIDIA H200"], ["1", "0"]),
    ("", [], []),  # the empty string: no GPU at all
    ("0,7,1", ["NVIDIA H200"], ["0"]),  # CUDA stops at the first entry it cannot resolve
    ("0,0", ["NVIDIA H200"], ["0"]),  # and at a repeated one
    ("GPU-9f8e7d6c-0000-1111-2222-333344445555", ["NVIDIA H200"], ["GPU-9f8e7d6c-0000-1111-2222-333344445555"]),
    ("GPU-9f8e", ["NVIDIA H200"], ["GPU-9f8e"]),  # a unique UUID prefix, as CUDA accepts
    ("GPU-", [], []),  # a prefix that matches both GPUs resolves to none
    ("GPU-9f8e,GPU-1a2b", ["NVIDIA H200", "NVIDIA H200"], ["GPU-9f8e", "GPU-1a2b"]),
    ("GPU-9f8e,1", ["NVIDIA H200"], ["GPU-9f8e"]),  # index 1 is the same GPU again
    ("-1", [], []),
])
def test_every_cuda_visible_devices_form(tmp_path, visible, names, ids):
    inv = devices.discover({**fake_smi(tmp_path, H200), "CUDA_VISIBLE_DEVICES": visible})
    assert list(inv.gpus) == names and list(inv.gpu_ids) == ids
    assert f"CUDA_VISIBLE_DEVICES={visible!r}" in inv.how


def test_mig_devices_resolve_and_cuda_shows_only_one_per_process(tmp_path):
    env = fake_smi(tmp_path, MIG_GPU, {MIG_GPU[0][1]: MIGS})
    one = devices.discover({**env, "CUDA_VISIBLE_DEVICES": MIGS[1]})
    assert one.gpus == ("NVIDIA A100-SXM4-40GB",) and one.gpu_ids == (MIGS[1],)
    both = devices.discover({**env, "CUDA_VISIBLE_DEVICES": ",".join(MIGS)})
    assert both.gpu_ids == (MIGS[0],) and "one MIG device per process" in both.how
    unknown = devices.discover({**env, "CUDA_VISIBLE_DEVICES": "MIG-deadbeef"})
    assert unknown.gpus == ()


def test_indices_follow_cuda_device_order(tmp_path):
    env = fake_smi(tmp_path, MIXED)
    # PCI_BUS_ID: CUDA's index = nvidia-smi's index
    pci = devices.discover({**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"})
    assert pci.gpus == ("Tesla T4",)
    # default FASTEST_FIRST: the A100 (8.0) is CUDA device 0 although nvidia-smi lists it second
    fastest = devices.discover({**env, "CUDA_VISIBLE_DEVICES": "0"})
    assert fastest.gpus == ("NVIDIA A100-SXM4-40GB",) and "approximated" in fastest.how
    unset = devices.discover(env)
    assert unset.gpus == ("NVIDIA A100-SXM4-40GB", "Tesla T4")
    assert unset.gpu_ids == (MIXED[1][1], MIXED[0][1])  # UUIDs: right whatever CUDA's order is


def inventory(tmp_path: Path, gpus) -> devices.Inventory:
    return devices.discover(fake_smi(tmp_path, gpus))


@pytest.mark.parametrize("n_gpus", [1, 2, 8])
def test_gpu_runs_spread_workers_over_gpus_one_each(tmp_path, n_gpus):
    inv = inventory(tmp_path, eight()[:n_gpus])
    got = [devices.worker_gpus(w, 4, ("gpu",), inv) for w in range(4)]
    assert all(len(devices.visible_tokens(g)) == 1 for g in got)
    assert len(set(got)) == min(4, n_gpus)  # workers share a GPU only when there are more workers than GPUs
    assert got == [inv.gpu_ids[w % n_gpus] for w in range(4)]


@pytest.mark.parametrize("n_gpus", [2, 8])
def test_multi_gpu_workers_see_every_gpu_home_first_and_take_turns(tmp_path, n_gpus):
    inv = inventory(tmp_path, eight()[:n_gpus])
    got = [devices.visible_tokens(devices.worker_gpus(w, 2, ("cpu", "gpu", "multi-gpu"), inv)) for w in range(2)]
    assert all(sorted(g) == sorted(inv.gpu_ids) for g in got)
    # each worker's single-GPU tests run on cuda:0 / /GPU:0, its home GPU: not all on one GPU
    assert got[0][0] != got[1][0]


def test_cpu_runs_hide_the_gpus_from_workers(tmp_path):
    inv = inventory(tmp_path, H200)
    assert devices.worker_gpus(1, 2, ("cpu",), inv) == ""


def test_gpu_lock_serializes_holders(tmp_path):
    lock = str(tmp_path / "gpu.lock")
    inside, overlaps = [], []

    def hold() -> None:
        with devices.gpu_lock(lock):
            inside.append(1)
            overlaps.append(len(inside))
            time.sleep(0.05)
            inside.pop()

    threads = [threading.Thread(target=hold) for _ in range(4)]  # flock locks are per open file
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1, 1, 1, 1]


@pytest.mark.parametrize("kinds, replicas, expected", [
    (("gpu",), 2, 2), (("gpu",), 4, 4), (("cpu",), 2, 1), (("cpu", "gpu", "multi-gpu"), 2, 1), (("multi-gpu",), 2, 1),
])
def test_one_gpu_runs_split_the_gpu_into_logical_replicas(kinds, replicas, expected):
    assert devices.logical_gpus(kinds, replicas) == expected


@pytest.mark.parametrize("cap, supported", [("8.0", True), ("9.0", True), ("7.5", False), ("7.0", False), ("", False)])
def test_bf16_needs_compute_capability_8(cap, supported):
    reason = devices.bf16_support(cap)
    assert (reason is None) == supported
    if not supported:
        assert cap in reason


def test_the_report_names_the_gpus_the_run_uses_not_every_gpu_of_the_machine(tmp_path):
    env = fake_smi(tmp_path, H200)
    inv = devices.discover({**env, "CUDA_VISIBLE_DEVICES": H200[1][1]})
    details = devices.gpu_details(inv, env)
    assert details == {"gpus": [{"name": "NVIDIA H200", "memory": "81 GiB"}], "driver": "570.86", "cuda": "12.8"}
    assert devices.gpu_details(devices.discover({"PATH": str(tmp_path)}), {"PATH": str(tmp_path)})["gpus"] == []
