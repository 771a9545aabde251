r"""The cores' float32 FMA ceiling at each vector width they have; JSON lines.

  python benchmarks/fma_ceiling.py [--threads=2] [--seconds=1]

The peer harness's probe (`../shared/bench/peers/fma_peak`) runs 256-bit
FMAs. That is the ceiling on Zen 3, and on Zen 4, which splits a 512-bit FMA
into two 256-bit halves, but only half of it on cores with two full-width
512-bit FMA pipes: on this project's Zen 5 VM (2026-12-02) 512-bit FMAs ran at
417-495 GFLOP/s on two cores against 206-246 for 256-bit ones. oneDNN's
matmuls use the full width, so a model FLOP utilisation taken against the
256-bit probe there is twice too high. This measures every width the CPU
has (`/proc/cpuinfo`), with the same kind of kernel as the harness (12
independent FMA chains per thread in registers, no memory traffic), compiled
by gcc; the last line gives the widest width's rate, the ceiling to take MFU
against.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app, flags

flags.DEFINE_integer(
    "threads", os.cpu_count() or 1, "Threads, one per core.", lower_bound=1
)
flags.DEFINE_float(
    "seconds", 1.0, "How long each of 3 timed runs lasts.", lower_bound=0.01
)
FLAGS = flags.FLAGS

# Vector bits -> (the /proc/cpuinfo flags it needs, gcc's flags, the C
# type and intrinsics' prefix).
WIDTHS = {
    256: ({"avx2", "fma"}, ["-mavx2", "-mfma"], "__m256", "_mm256"),
    512: ({"avx512f"}, ["-mavx512f"], "__m512", "_mm512"),
}
CHAINS = 12  # Independent chains: enough for 4-cycle latency x 2 pipes.

_SOURCE = r"""
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PASTE(a, b) a##b
#define EXPAND(a, b) PASTE(a, b)
#define OP(name) EXPAND(PREFIX, name)
#define ROUND 100000L /* FMAs a chain between two looks at the clock */

typedef VEC vec;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
typedef struct { double seconds, flops; float sink; } job_t;

static void *run(void *arg) {
  job_t *job = (job_t *)arg;
  /* A start value the compiler cannot know, so it cannot fold the chains. */
  volatile float seed = 1.0f;
  vec a = OP(_set1_ps)(0.999999f), b = OP(_set1_ps)(1e-7f), c[CHAINS];
  /* Unrolled, so the chains live in registers. */
#pragma GCC unroll 64
  for (int k = 0; k < CHAINS; k++) c[k] = OP(_set1_ps)(seed + k);
  long rounds = 0;
  double start = now(), elapsed;
  do {
    for (long i = 0; i < ROUND; i++)
#pragma GCC unroll 64
      for (int k = 0; k < CHAINS; k++) c[k] = OP(_fmadd_ps)(c[k], a, b);
    rounds++;
    elapsed = now() - start;
  } while (elapsed < job->seconds);
  float out[sizeof(vec) / 4];
#pragma GCC unroll 64
  for (int k = 1; k < CHAINS; k++) c[0] = OP(_add_ps)(c[0], c[k]);
  OP(_storeu_ps)(out, c[0]);
  job->sink = out[0];
  /* 2 FLOP per lane per FMA. */
  job->flops = 2.0 * (sizeof(vec) / 4) * CHAINS * ROUND * (double)rounds;
  job->seconds = elapsed;
  return NULL;
}

int main(int argc, char **argv) {
  int threads = atoi(argv[1]);
  double seconds = atof(argv[2]), best = 0;
  pthread_t ids[threads];
  job_t jobs[threads];
  for (int repeat = 0; repeat < 3; repeat++) {
    double rate = 0;
    for (int i = 0; i < threads; i++) {
      jobs[i].seconds = seconds;
      pthread_create(&ids[i], NULL, run, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) {
      pthread_join(ids[i], NULL);
      rate += jobs[i].flops / jobs[i].seconds;
      if (jobs[i].sink == 12345.0f) printf(" ");
    }
    if (rate > best) best = rate;
  }
  printf("%.1f\n", best / 1e9);
  return 0;
}
"""


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The first core's feature flags, or an empty set where there are none."""
    try:
        with open(cpuinfo) as file:
            for line in file:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def available_widths(flags_present):
    """The vector widths (bits) whose instructions the CPU has, ascending."""
    return [
        bits for bits, (needs, *_) in WIDTHS.items() if needs <= flags_present
    ]


def compile_probe(bits, folder):
    """Compiles the kernel for `bits`-wide vectors; returns its path."""
    _, gcc_flags, vec_type, prefix = WIDTHS[bits]
    source = os.path.join(folder, f"fma_{bits}.c")
    binary = os.path.join(folder, f"fma_{bits}")
    with open(source, "w") as file:
        file.write(_SOURCE)
    command = [
        "gcc",
        "-O2",
        *gcc_flags,
        f"-DVEC={vec_type}",
        f"-DPREFIX={prefix}",
        f"-DCHAINS={CHAINS}",
        "-pthread",
        source,
        "-o",
        binary,
    ]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit(
            "fma_ceiling: gcc is not installed; install it (apt install gcc)."
        )
    except subprocess.CalledProcessError as error:
        sys.exit(
            f"fma_ceiling: gcc failed on the {bits}-bit kernel:\n{error.stderr}"
        )
    return binary


def measure(binary, threads, seconds):
    """GFLOP/s of the best of 3 runs of `threads` threads for `seconds`."""
    result = subprocess.run(
        [binary, str(threads), str(seconds)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(result.stdout)


def main(argv):
    del argv
    widths = available_widths(cpu_flags())
    if not widths:
        sys.exit(
            "fma_ceiling: the CPU reports neither AVX2+FMA nor AVX-512F in "
            "/proc/cpuinfo (an x86-64 CPU with them is needed)."
        )
    rates = {}
    with tempfile.TemporaryDirectory() as folder:
        for bits in widths:
            rate = measure(
                compile_probe(bits, folder), FLAGS.threads, FLAGS.seconds
            )
            rates[bits] = rate
            print(
                json.dumps(
                    {
                        "benchmark": "fma_ceiling",
                        "vector_bits": bits,
                        "threads": FLAGS.threads,
                        "gflop_per_s": rate,
                    }
                )
            )
    print(
        json.dumps(
            {
                "benchmark": "fma_ceiling",
                "threads": FLAGS.threads,
                "widest_vector_bits": widths[-1],
                "ceiling_gflop_per_s": rates[widths[-1]],
                "widest_over_256_bit": (
                    round(rates[widths[-1]] / rates[256], 2)
                    if 256 in rates
                    else None
                ),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
