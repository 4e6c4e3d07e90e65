"""The learner's CUDA 11 libraries from the nvidia-*-cu11 wheels: which files are loaded, in which order, and that
nothing is loaded without the CUDA 11 runtime (torch's cu12 wheels share some sonames)."""

from __future__ import annotations

from actorq import gpu

CU11 = {
    "cuda_runtime": ["libcudart.so.11.0"],
    "cublas": ["libcublas.so.11", "libcublasLt.so.11", "libnvblas.so.11"],
    "cudnn": ["libcudnn.so.8", "libcudnn_ops_infer.so.8", "libcudnn_cnn_infer.so.8"],
    "curand": ["libcurand.so.10"],
}


def _wheels(root, packages):
    dirs = []
    for package, names in packages.items():
        lib = root / "nvidia" / package / "lib"
        lib.mkdir(parents=True)
        for name in names:
            (lib / name).write_bytes(b"")
        dirs.append(lib)
    return dirs


def test_only_tensorflows_sonames_in_dependency_order(tmp_path):
    names = [f.name for f in gpu.library_files(_wheels(tmp_path, CU11))]
    assert names == [
        "libcudart.so.11.0", "libcublasLt.so.11", "libcublas.so.11", "libcurand.so.10",
        "libcudnn_cnn_infer.so.8", "libcudnn_ops_infer.so.8", "libcudnn.so.8",
    ]  # fmt: skip


def test_nothing_is_loaded_without_the_cuda_11_runtime(tmp_path):
    # torch's cu12 wheels: libcurand.so.10 matches TF 2.8's soname but belongs to CUDA 12.
    dirs = _wheels(tmp_path, {"curand": ["libcurand.so.10"], "cuda_runtime": ["libcudart.so.12"]})
    assert [f.name for f in gpu.library_files(dirs)] == ["libcurand.so.10"]
    assert gpu.preload(dirs) == []


def test_a_library_that_does_not_load_is_skipped(tmp_path):
    # Empty files are no shared objects: each is logged and skipped, the learner goes on (on the CPU).
    assert gpu.preload(_wheels(tmp_path, CU11)) == []
