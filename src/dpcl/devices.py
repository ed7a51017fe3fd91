"""Where torch computes: the device a config names, resolved once per job, and what a job's outputs record
about it.

``auto`` takes the first CUDA GPU torch sees, else the CPU; ``cpu`` and ``cuda`` are taken as said. A job
asked for ``cuda`` that sees no GPU fails at once, naming the config key and the fix, instead of
falling back to the CPU: the paper grid's FiLM fine-tuning (``config/paper.yaml``: ``film.device:
cuda``) would otherwise run for days on a node's CPU and land with nothing saying so. What a run
computed on goes into its provenance (:func:`device_record`): outputs are bit-identical across reruns on
the same CPU or GPU model and software, not across different ones. On CUDA that needs deterministic
kernels (:func:`use_deterministic`, config key ``film.deterministic``, on by default): fp32 attention's
backward and cuBLAS's split reductions otherwise vary from run to run, and cuDNN would use TF32.
"""

from __future__ import annotations

import os

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str, *, key: str = "film.device"):
    """The ``torch.device`` of ``name``: a config value of :data:`DEVICES` or any device string torch
    knows (``"cuda:1"``); ``key`` names the setting in the error a job without the GPU it was asked for
    raises."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{key} must be one of {list(DEVICES)} (or a torch device), got {name!r}") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "built without CUDA"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise RuntimeError(
            f"{key} is {name!r}, but this job sees no CUDA GPU (torch {torch.__version__} {built}; "
            f"CUDA_VISIBLE_DEVICES={'unset' if visible is None else repr(visible)}). Run it where a GPU is "
            f"visible (snakemake --profile slurm asks for one per FiLM job; locally, a machine with a GPU and "
            f"a CUDA build of torch), or set {key}: auto (a GPU when there is one, else the CPU) or cpu"
        )
    return dev


def use_deterministic(device, on: bool) -> None:
    """On a CUDA ``device`` with ``on``: deterministic algorithms only (an op without one raises, see
    :func:`nondeterministic_error`), cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, set before the
    job's first CUDA call), no cuDNN autotuning and no TF32 in cuDNN or matrix products. On the CPU it
    does nothing: the kernels dpcl runs there are deterministic (reruns are compared bit for bit in the
    tests). Process-wide: call it once per job, after :func:`resolve_device`."""
    import torch

    if not on or torch.device(device).type != "cuda":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def nondeterministic_error(err: BaseException, key: str = "film.deterministic") -> RuntimeError | None:
    """A clearer error for torch's refusal of an op without a deterministic CUDA kernel, naming ``key``;
    None for any other error."""
    if "does not have a deterministic implementation" not in str(err):
        return None
    return RuntimeError(
        f"{str(err).splitlines()[0]} With {key}: true (the default) every CUDA kernel must be deterministic, "
        f"so that reruns are bit-identical; set {key}: false to run with this op (reruns on the GPU may then "
        "differ in the last bits), or use a backbone without it"
    )


def device_record(device, *, deterministic: bool | None = None, precision: str | None = None) -> dict:
    """What an output records about the device it was computed on: its type and, on CUDA, the GPU's name
    and compute capability, the CUDA and cuDNN versions torch runs with and (when given) whether
    :func:`use_deterministic` was on; and (when given) the precision of the model's passes
    (:mod:`dpcl.training.precision`)."""
    import torch

    dev = torch.device(device)
    rec: dict = {"type": dev.type}
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        rec |= {
            "gpu": torch.cuda.get_device_name(index),
            "capability": f"{major}.{minor}",
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
        }
        if deterministic is not None:
            rec["deterministic"] = bool(deterministic)
    if precision is not None:
        rec["precision"] = precision
    return rec
