"""Enhanced DP-A-GEM ([Desai2021]) with FiLM on images: a baseline ([LabelSpace] Sec. 6.1,
Fig. 3, App. D.4, "to fine-tune the same ViT-B model (with PEFT)").

The FiLM twin of :mod:`dpcl.learners.agem` (read its docstring for the mechanism and the
accounting; every convention is shared, not copied): one FiLM model (every normalisation layer's scale
and bias + a head over the label universe, softmax restricted to ∪_{k≤t} O_k, like
the Naive FiLM baseline) trained task after task. Each task's kept data is split by a seeded coin per
sample id (:func:`~dpcl.learners.agem.split_task`) into a train part and a reference part;
the reference parts of past tasks, as **raw images**, form the memory buffer (the documented
non-DP state of this baseline). Every step of task t draws

- g: clipped per-sample-gradient sum of a Poisson sample (rate q) of the train part + N(0, σ²C²);
- at t ≥ 1, g_ref: the same over a Poisson sample (rate q_ref) of the buffer + N(0, σ_ref²C²),
  also when that sample is empty;

flattens both over all trainable parameters and projects g when gᵀg_ref < 0 (Eq. A102) before
the public normaliser and Adam (:func:`dpcl.training.film.train_film` with a
:class:`~dpcl.training.film.BufferMechanism`). σ and σ_ref come from :func:`~dpcl.learners.agem.agem_noise`
(σ_ref calibrated for the worst case (T − 1)·steps rereads) and the ledger entries from
:func:`~dpcl.learners.agem.task_records`. Task t's mechanisms draw from ``rng_for(t, "train")``
and ``rng_for(t, "reference")``, so no noise is shared between g and g_ref.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..backbones import Preprocessing
from ..training.heads import DPSGDConfig
from .agem import LEDGER_SPEC as LEDGER_SPEC  # the same ledger as DP-A-GEM on cached features
from .agem import AGEMConfig, split_task, task_records
from .aggregation import aggregate
from .peft import FILM_WHITEBOX
from .registry import LearnerSpec

if TYPE_CHECKING:  # the FiLM engine imports torch: loaded only when the learner runs
    from ..training.film_member import FilmMember

LEARNER = "agem_film"

#: the registry's entries (dpcl.learners.registry)
SPECS = (
    LearnerSpec(
        name="agem_film",
        display="DP-A-GEM (FiLM)",
        figure_label="DP-A-GEM (enhanced, FiLM)",
        adapter="film",
        job="film_baseline",
        run="dpcl.learners.agem_film:run",
        methods="agem",
        module="agem_film",
        fig3="compared",
        config_blocks=("agem",),
        # train_film's g (the train part), audited without a buffer: the buffer branch g_ref is not run
        whitebox=FILM_WHITEBOX,
        resources={"mem_mb": 8000, "runtime": 1440},
    ),
)


def run_agem_film(
    task_data: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    backbone,
    pre: Preprocessing,
    *,
    cfg: DPSGDConfig,
    agem: AGEMConfig,
    noise: dict,
    noise_ref: dict | None,
    rng_for: Callable[[int, str], np.random.Generator],
    split_seed: int,
    physical_batch: int = 32,
    device: str = "auto",
    progress: bool = False,
    precision: str = "fp32",
) -> tuple[list[list[np.ndarray]], list[list[dict]], list[dict], FilmMember]:
    """Train FiLM DP-A-GEM through the tasks: (predictions[t][i], ledger entries per task, task
    stats, final model over the label universe).

    ``task_data[t]`` = (uint8 images, labels, sample ids); ``noise``/``noise_ref`` come from
    :func:`~dpcl.learners.agem.agem_noise`; ``rng_for(t, part)`` gives the generator of task
    t's "train" or "reference" mechanism; ``split_seed`` seeds the reference split.
    """
    from ..training.film import BufferMechanism, train_film
    from ..training.film_inference import film_logits
    from ..training.film_member import pretrained_member

    agem.validate()
    n_tasks = len(task_data)
    if n_tasks > 1 and noise_ref is None:
        raise ValueError("more than one task needs the buffer's noise (agem_noise)")
    sigma = float(noise["noise_multiplier"])
    sigma_ref = float(noise_ref["noise_multiplier"]) if noise_ref else 0.0
    q_ref = agem.ref_rate(cfg)
    model = pretrained_member(backbone, n_universe)
    active = np.zeros(n_universe, dtype=bool)
    buf_x: list[np.ndarray] = []
    buf_y: list[np.ndarray] = []
    preds: list[list[np.ndarray]] = []
    records: list[list[dict]] = []
    stats: list[dict] = []
    for t, (x, y, ids) in enumerate(task_data):
        o_t = sorted(label_spaces[t])
        active[o_t] = True
        keep, ref = split_task(y, ids, o_t, t == n_tasks - 1, agem, split_seed)
        tr = keep & ~ref
        buffer = None
        if t > 0:  # the buffer mechanism runs at every task t ≥ 1, whatever the buffer holds
            buffer = BufferMechanism(
                np.concatenate(buf_x), np.concatenate(buf_y), q_ref, sigma_ref, rng_for(t, "reference")
            )
        model, info = train_film(
            backbone,
            x[tr],
            y[tr],
            n_universe,
            cfg,
            noise_multiplier=sigma,
            rng=rng_for(t, "train"),
            pre=pre,
            physical_batch=physical_batch,
            init=model,
            active=active.copy(),
            device=device,
            progress=progress,
            buffer=buffer,
            precision=precision,
        )
        info = {**info, "projected_fraction": info.get("projected_fraction", 0.0)}
        records.append(
            task_records(
                t,
                n_tasks,
                cfg,
                agem,
                noise=noise,
                noise_ref=noise_ref,
                n_train=int(tr.sum()),
                n_ref=int((keep & ref).sum()),
                info=info,
            )
        )
        stats.append(
            {
                "task": t,
                "train_samples": int(tr.sum()),
                "buffer_samples_before": int(sum(len(b) for b in buf_y)),
                "mean_clipped_fraction": info["mean_clipped_fraction"],
                "projected_fraction": info["projected_fraction"],
            }
        )
        buf_x.append(x[keep & ref])
        buf_y.append(np.asarray(y[keep & ref], dtype=np.int64))
        ids_active = np.flatnonzero(active)
        preds.append(
            [
                aggregate([film_logits(backbone, model, xt, pre, device=device)[:, ids_active]], [ids_active])
                if ids_active.size
                else np.full(len(xt), -1)
                for xt, _ in test_sets[: t + 1]
            ]
        )
    return preds, records, stats, model


def run(inputs):
    """One FiLM DP-A-GEM run (App. D.4), the learner contract (:mod:`dpcl.learners.api`): the tasks' ``x``
    are images; ``inputs.job`` is the FiLM job's :class:`dpcl.stages.film.FilmJob` (the backbone, the run's
    DP-SGD config, tuned or configured, its tuning protocol and the config's ``agem`` block). privacy.json
    gets the head-only run's "agem" block; the model is the final FiLM values + head over the label
    universe."""
    import time

    from ..training.tuning_protocol import hyperparameters_note
    from .agem import agem_noise, privacy_summary
    from .api import RunResult

    job = inputs.job
    cfg = DPSGDConfig.from_block(job.dpsgd_cfg)
    try:
        agem = AGEMConfig.from_config(job.agem_cfg)
    except TypeError as e:
        raise ValueError(f"config key 'agem': {e}; allowed keys: buffer_fraction, buffer_sample_rate") from e
    agem.validate()
    n_tasks = len(inputs.tasks)
    noise, noise_ref = agem_noise(inputs.epsilon, inputs.delta, cfg, agem, n_tasks)
    t0 = time.perf_counter()
    preds, records, stats, model = run_agem_film(
        [(t.x, t.y, t.ids) for t in inputs.tasks],
        list(inputs.test_sets),
        [sorted(t.label_space) for t in inputs.tasks],
        inputs.n_universe,
        job.backbone,
        job.pre,
        cfg=cfg,
        agem=agem,
        noise=noise,
        noise_ref=noise_ref,
        rng_for=inputs.rng_for,
        split_seed=inputs.seed,
        physical_batch=job.physical_batch,
        device=job.device,
        progress=job.progress,
        precision=job.precision,
    )
    extra = {
        "noise_multiplier": noise["noise_multiplier"],
        "buffer_noise_multiplier": None if noise_ref is None else noise_ref["noise_multiplier"],
        "dpsgd": job.dpsgd_cfg,
        "tuned": job.protocol is not None,
        "agem": job.agem_cfg,
    }
    return RunResult(
        predictions=preds,
        records=records,
        extra=extra,
        summary=lambda priv, led: privacy_summary(
            priv, led, cfg, agem, noise=noise, noise_ref=noise_ref, n_tasks=n_tasks
        ),
        hyperparameters=hyperparameters_note(job.dpsgd_cfg, job.protocol),
        diagnostics={"agem_tasks": stats, "seconds": round(time.perf_counter() - t0, 1)},
        model={"label_ids": np.arange(inputs.n_universe, dtype=np.int64), **model.to_arrays()},
    )
