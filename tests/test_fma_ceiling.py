"""benchmarks/fma_ceiling.py: the cores' FMA ceiling at each vector width."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import fma_ceiling

SCRIPT = fma_ceiling.__file__
HOST_WIDTHS = fma_ceiling.available_widths(fma_ceiling.cpu_flags())
needs_x86_vectors = pytest.mark.skipif(
    not HOST_WIDTHS, reason="needs an x86-64 CPU with AVX2 or AVX-512"
)


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env,
    )


def test_widths_follow_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    flags = fma_ceiling.cpu_flags(str(cpuinfo))
    assert {"avx2", "fma", "avx512f"} <= flags
    assert fma_ceiling.available_widths(flags) == [256, 512]
    assert fma_ceiling.available_widths({"avx2", "fma"}) == [256]
    # AVX2 without FMA has no 256-bit FMA instruction.
    assert fma_ceiling.available_widths({"avx", "avx2"}) == []
    assert fma_ceiling.cpu_flags(str(tmp_path / "missing")) == set()


@needs_x86_vectors
def test_measures_every_width_the_cpu_has():
    result = run("--threads=1", "--seconds=0.02")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["vector_bits"] for line in lines[:-1]] == HOST_WIDTHS
    rates = {line["vector_bits"]: line["gflop_per_s"] for line in lines[:-1]}
    # Sanity bounds: at least one FMA a cycle at 1 GHz, and no more than 64
    # FMA pipes' worth at 5 GHz (a loop the compiler folded away would take
    # no time at all).
    for bits, rate in rates.items():
        lanes = bits // 32
        assert 2 * lanes <= rate <= 64 * 2 * lanes * 5, (bits, rate)
    summary = lines[-1]
    assert summary["widest_vector_bits"] == HOST_WIDTHS[-1]
    assert summary["ceiling_gflop_per_s"] == rates[HOST_WIDTHS[-1]]
    if 256 in rates:
        assert summary["widest_over_256_bit"] == round(
            rates[HOST_WIDTHS[-1]] / rates[256], 2
        )


@needs_x86_vectors
def test_without_gcc_names_the_fix(tmp_path):
    # A PATH with nothing on it: gcc is not found.
    result = run(
        "--threads=1",
        "--seconds=0.02",
        env=dict(os.environ, PATH=str(tmp_path)),
    )
    assert result.returncode != 0
    assert "gcc is not installed" in result.stderr
    assert "Traceback" not in result.stderr
