"""Tunables shared by every jitted kernel (one place, as in stumpy's ``config``)."""

#: numba ``fastmath`` flag for floating-point kernels.  Off: results must be
#: reproducible bit for bit and NaN checks must not be optimised away.
FASTMATH = False

#: Inputs per chunk in exhaustive enumerations (one progress-bar step).
VERIFY_CHUNK = 1 << 20

#: Largest ``m * N`` the exhaustive verifier accepts (2**26 inputs).
VERIFY_MAX_BITS = 26

#: Most layers a protocol plan may declare (each layer is one pass over every token
#: of every input: 10^4 layers took 36 s at q = 3, 10^7 would take hours).
PLAN_MAX_LAYERS = 10_000

#: Largest ``m`` for the 2**m one-hot feature construction.
ONEHOT_MAX_M = 20

#: A scored position is right when ``|y - t|`` is strictly below this (THEORY section 2).
EXACT_TOLERANCE = 0.5

#: OOD training protocol (every model alike): a run stops once every training
#: error is below this, or at its step budget.  Chosen on the validation split
#: of the train pools (``sketchsim ablation
#: --screen-stop 0.25,0.1,0.05,0.02``: the margin with the highest worst softmax
#: validation accuracy), never on the test pool; docs/results.md has the screen.
OOD_STOP_BELOW = 0.05

#: Trained experiments (sweep, reproduce): largest feature rank, seed count,
#: step count and estimated parameter count a run accepts without
#: ``--allow-large`` (refuse, don't try).
SWEEP_MAX_RANK = 4096
SWEEP_MAX_SEEDS = 1000
SWEEP_MAX_STEPS = 1_000_000
SWEEP_MAX_PARAMS = 50_000_000
#: Capacity suite: training inputs per run without ``--allow-large`` (the memory
#: estimate still applies).
SWEEP_MAX_TRAIN_INPUTS = 1 << 17

#: The paper's reported numbers (PAPER.md, "Experiments reported"), in one place.
PAPER = {
    "witness_inputs": 1272,
    "witness_m": 24,
    "witness_lower_bound": 8,
    "witness_fail_error_below_bound": 0.80,
    "witness_exact_rank": 32,
    "ood_transition_ranks": (8, 16, 64),
    "transcript_q": 64,
    "transcript_s": 7,
    "transcript_bits": 192,
}

#: Exhaustive verification throughput per core at N = 3 (inputs/s), for time
#: estimates only; cost grows as N^2 (docs/benchmarks.md).
VERIFY_RATE_PER_CORE = 2.0e7

#: Largest ``m * N`` that ``verify --cluster`` accepts (2**40 inputs).
CLUSTER_VERIFY_MAX_BITS = 40

#: Inputs per cluster task in sharded enumerations (one state file each).
CLUSTER_SHARD_INPUTS = 1 << 24

#: ``transcript`` / ``frontier``: exhaustive mode is the default up to this many
#: inputs and is refused above the maximum.
TRANSCRIPT_EXHAUSTIVE_AUTO = 1 << 20
TRANSCRIPT_EXHAUSTIVE_MAX = 1 << 24

#: Memory a transcript run may plan to allocate (answer vectors, fingerprints,
#: grouping temporaries, per-entry value counts); the environment variable
#: ``SKETCHSIM_MAX_MEMORY_GB`` raises or lowers it.
TRANSCRIPT_MAX_BYTES = 8 << 30

#: Bytes of exact transcripts held at once while counting per-entry values.
TRANSCRIPT_STORE_BYTES = 64 << 20

#: Two-sided confidence level of the entry-entropy interval.
ENTROPY_CONFIDENCE = 0.95

#: Bits are compared with the bound up to this rounding tolerance.
BITS_TOLERANCE = 1e-9

#: ``transcript --cluster``: exhaustive mode is accepted up to this many inputs
#: (the single-process limit stays :data:`TRANSCRIPT_EXHAUSTIVE_MAX`).
CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX = 1 << 32

#: ``transcript --cluster``: the planned peak memory of one map or reduce task;
#: shards and fingerprint ranges are sized to it (measured bytes per input,
#: ``sketchsim/cluster/sharded_measure.py``), so workers of a few GiB hold several.
CLUSTER_TASK_BYTES = 256 << 20

#: ``transcript --cluster``: up to this many inputs the client receives the group
#: sizes in fingerprint order (at most 4 bytes per group) and computes the
#: transcript entropy with the very sum the single process uses, bit for bit;
#: above it, from the merged histogram of group sizes (equal up to rounding).
CLUSTER_TRANSCRIPT_ORDERED_MAX = 1 << 26

#: Transcript throughput per core (inputs/s, a built-in protocol on F(8, 7)),
#: for time estimates only; protocols differ by an order of magnitude.
TRANSCRIPT_RATE_PER_CORE = 2.0e5
