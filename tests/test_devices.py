"""The device a config names (dpcl.devices): auto falls back to the CPU, cuda without a GPU fails at once
naming the key and the fix, and what outputs record about the device."""

import os

import pytest
import torch

from dpcl.devices import device_record, nondeterministic_error, resolve_device, use_deterministic


@pytest.fixture
def no_gpu(monkeypatch):
    """A job that sees no CUDA GPU, whatever machine runs the test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_takes_the_cpu_without_a_gpu_and_cpu_is_the_cpu(no_gpu):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_fails_naming_the_key_and_the_fix(no_gpu, name):
    with pytest.raises(RuntimeError, match="sees no CUDA GPU") as err:
        resolve_device(name, key="film.device")
    msg = str(err.value)
    assert f"film.device is {name!r}" in msg and "film.device: auto" in msg and "--profile slurm" in msg
    assert "CUDA_VISIBLE_DEVICES=" in msg


def test_an_unknown_device_is_refused_by_its_key():
    with pytest.raises(ValueError, match="film.device must be one of"):
        resolve_device("gpu0", key="film.device")


def test_the_cpu_record_is_its_type():
    assert device_record("cpu") == {"type": "cpu"}
    assert device_record(torch.device("cpu")) == {"type": "cpu"}
    assert device_record("cpu", deterministic=True) == {"type": "cpu"}  # a CUDA setting: not recorded
    # the passes' precision is recorded on every device (film.precision: bf16 runs on CPUs too)
    assert device_record("cpu", precision="bf16") == {"type": "cpu", "precision": "bf16"}


def test_determinism_leaves_the_cpu_as_it_is(monkeypatch):
    """film.deterministic configures CUDA only: on the CPU no global torch setting changes."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.allow_tf32)
    use_deterministic(torch.device("cpu"), True)
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.allow_tf32) == before
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_a_missing_deterministic_kernel_is_explained_by_its_key():
    torch_msg = (
        "adaptive_avg_pool2d_backward_cuda does not have a deterministic implementation, but you set "
        "'torch.use_deterministic_algorithms(True)'."
    )
    err = nondeterministic_error(RuntimeError(torch_msg))
    assert isinstance(err, RuntimeError) and "film.deterministic: false" in str(err)
    assert "adaptive_avg_pool2d_backward_cuda" in str(err)
    assert nondeterministic_error(RuntimeError("CUDA out of memory")) is None


def test_a_film_run_asked_for_cuda_fails_before_reading_anything(no_gpu, tmp_path):
    """The FiLM stage resolves its device first: a job without the GPU it was asked for reads no file and
    loads no backbone before it fails."""
    from dpcl.stages.film import film_run_stage

    missing = tmp_path / "absent.json"
    with pytest.raises(RuntimeError, match="film.device is 'cuda'"):
        film_run_stage(
            "peft_film",
            "fashion_mnist",
            tmp_path,
            {},
            {"arch": "vit_tiny_patch16_224", "weights": "random"},
            scenario_path=missing,
            labels_path=missing,
            dpsgd_cfg={},
            physical_batch=8,
            device="cuda",
            out_metrics=tmp_path / "m.json",
            out_privacy=tmp_path / "p.json",
            out_members=tmp_path / "members",
        )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("stage", ["film_run_stage", "tune_film_stage"])
def test_a_film_job_asked_for_tf32_on_a_cpu_fails_before_reading_anything(tmp_path, stage):
    """film.precision tf32 is a CUDA mode: a FiLM job on the CPU refuses it, naming the key, before it
    reads a file or loads a backbone (it would otherwise run in fp32 while its record said tf32)."""
    from dpcl.stages import film

    missing = tmp_path / "absent.json"
    common = {"scenario_path": missing, "dpsgd_cfg": {}, "physical_batch": 8, "device": "cpu"}
    with pytest.raises(ValueError, match="film.precision tf32 is a CUDA mode"):
        if stage == "film_run_stage":
            film.film_run_stage(
                "peft_film",
                "fashion_mnist",
                tmp_path,
                {},
                {"arch": "vit_tiny_patch16_224", "weights": "random"},
                labels_path=missing,
                out_metrics=tmp_path / "m.json",
                out_privacy=tmp_path / "p.json",
                out_members=tmp_path / "members",
                precision="tf32",
                **common,
            )
        else:
            film.tune_film_stage(
                "fashion_mnist",
                tmp_path,
                {},
                {"arch": "vit_tiny_patch16_224", "weights": "random"},
                epsilons=[1],
                delta=1e-5,
                outputs={"1": tmp_path / "t.json"},
                n_trials=1,
                precision="tf32",
                **common,
            )
    assert not list(tmp_path.iterdir())
