"""Which sweep options each suite reads: the rules the CLI refuses unread options by (#47).

:data:`READ_BY` maps an option some suites do not read (click's parameter name) to the
suites that read it; :func:`option_rules` turns it into the options a suite reads and
what to say about the others; :func:`check_given` refuses options that the plan's models
would ignore.  The CLI asks click which options were given and passes that in.
"""

from __future__ import annotations

from sketchsim.errors import SketchsimError

__all__ = [
    "READ_BY",
    "CAPACITY_HAS",
    "option_rules",
    "check_given",
    "check_plan_memory",
    "one_thread_on_cluster",
]

#: Options some suites do not read (click's parameter names) -> the suites that read them;
#: refused elsewhere once the plan is built (so a bad value is named first).  The capacity
#: suite trains float32 models with the mse loss on +-1 tokens (eps 1e-6), on the family's
#: inputs: its sweep file records none of these (``capacity_header``).
READ_BY = {
    "accuracy": ("ood",),
    "train_on": ("witness",),
    "triples": ("witness",),
    "family": ("witness", "capacity"),
    "loss": ("witness", "ood"),
    "eps": ("witness", "ood"),
    "dtype": ("witness", "ood"),
    "encoding": ("witness", "ood"),
    "plot_path": ("witness", "ood"),
    "train_bits": ("capacity",),
    "schedule": ("capacity",),
    "train_inputs": ("capacity",),
    "keep": ("capacity",),
    "train_rounding": ("capacity",),
    "qat_from": ("capacity",),
    "weight_l1": ("capacity",),
    "train_noise": ("capacity",),
    "rebase_at": ("capacity",),
    "rebase_lr": ("capacity",),
    "batch": ("capacity",),
}

#: Why the capacity suite does not read an option (appended to the refusal).
CAPACITY_HAS = {
    "accuracy": "the capacity suite reports accuracy, with no threshold",
    "loss": "the capacity suite trains with the mse loss",
    "eps": "the capacity suite's kernel layers use eps 1e-6",
    "dtype": "the capacity suite trains in float32",
    "encoding": "the capacity suite's tokens are pm1, 2x - 1",
    "train_on": "the capacity suite trains on the family's inputs",
    "triples": "the capacity suite trains on the family's inputs",
    "plot_path": "plot its weights with: sketchsim capacity WEIGHTS --plot PATH.png",
}


def option_rules(suite: str) -> tuple[set, dict]:
    """The options of :data:`READ_BY` that ``suite`` reads, and when each other one applies."""
    when = {}
    for name, suites in READ_BY.items():
        if suite not in suites:
            why = CAPACITY_HAS.get(name) if suite == "capacity" else None
            text = f"with --suite {' or '.join(suites)}"
            when[name] = f"{text} ({why})" if why else text
    return {name for name, suites in READ_BY.items() if suite in suites}, when


def check_given(plan, given) -> None:
    """Refuse ``--triples``, ``--feature-map`` and ``--ranks`` where no model reads them.

    ``given(name)``: whether option ``name`` was set on the command line.
    """
    from sketchsim.experiments.plan import parse_arch

    if given("triples") and plan.suite == "witness":
        if not any(plan.source(m) == "random" for m in plan.models):
            raise SketchsimError(
                "--triples applies only when a model trains on random triples (--train-on "
                "random, or auto with --model softmax); this run would ignore it"
            )
    archs = [parse_arch(a)[0] for a in plan.archs]
    if given("feature_map") and "kernel" not in plan.models and "linear" not in archs:
        raise SketchsimError(
            "--feature-map applies only to --model kernel and --arch linear; this run would "
            "ignore it"
        )
    ranked = [m for m in [*plan.models, *archs] if m != "softmax"] or list(plan.model_plugins)
    if given("ranks") and not ranked:
        raise SketchsimError(
            "--ranks applies only to kernel and signed models (softmax has no feature rank); "
            "this run would ignore it"
        )


def check_plan_memory(plan, device: str, save_weights: bool) -> None:
    """Refuse a capacity plan whose largest run would not fit in memory (before training)."""
    from sketchsim.experiments.memory import check_capacity_memory
    from sketchsim.experiments.suite_runs import capacity_specs
    from sketchsim.experiments.train import pick_device

    check_capacity_memory(capacity_specs(plan), pick_device(device), save_weights,
                          batch=plan.batch)  # fmt: skip


def one_thread_on_cluster(cluster, threads) -> None:
    """Refuse ``--threads`` other than 1 with a cluster (each worker runs one torch thread)."""
    if cluster is not None and threads != 1:
        raise SketchsimError(
            "--threads sets the in-process torch threads; with --cluster every run uses one "
            "torch thread per worker (start more workers instead)"
        )
