"""The accountant's disk cache (dpcl.privacy.cache): a hit returns exactly what the
computation returned, different parameters or code never share an entry, a damaged entry is
recomputed, and the cache can be switched off."""

import json

from dpcl.privacy import cache
from dpcl.privacy.sgd_accounting import accountant_record, noise_multiplier_info


def _entries(root):
    return sorted(root.rglob("*.json"))


def test_hit_equals_the_computation_and_keys_differ_by_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, "off")
    fresh = noise_multiplier_info(2.0, 1e-5, 0.3, 7)
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    first = noise_multiplier_info(2.0, 1e-5, 0.3, 7)  # computed, stored
    assert first == fresh and len(_entries(tmp_path)) == 1
    again = noise_multiplier_info(2.0, 1e-5, 0.3, 7)  # read back
    assert again == fresh and isinstance(again["noise_multiplier"], float)
    other = noise_multiplier_info(
        2.0, 1e-5, 0.3, 8
    )  # one more step: its own entry, a smaller budget per step
    assert len(_entries(tmp_path)) == 2 and other["noise_multiplier"] > fresh["noise_multiplier"]
    stored = json.loads(_entries(tmp_path)[0].read_text())
    assert stored["function"] == "noise_multiplier_info" and stored["value"] in (fresh, other)


def test_a_damaged_entry_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    want = noise_multiplier_info(1.0, 1e-5, 0.25, 4)
    (entry,) = _entries(tmp_path)
    entry.write_text("{not json")
    assert noise_multiplier_info(1.0, 1e-5, 0.25, 4) == want
    assert json.loads(entry.read_text())["value"] == want


def test_a_changed_accounting_code_key_misses(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    calls = []
    assert cache.memo("f", (1, 2.5), lambda: calls.append(1) or 7) == 7
    assert cache.memo("f", (1, 2.5), lambda: calls.append(1) or 8) == 7 and len(calls) == 1
    monkeypatch.setattr(cache, "_code_key", lambda packages=(): "another version")
    assert cache.memo("f", (1, 2.5), lambda: calls.append(1) or 9) == 9 and len(calls) == 2


def test_a_computation_running_more_of_dpcl_is_keyed_by_that_code_too(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    assert cache._code_key(("active",)) != cache._code_key()
    assert cache.memo("g", (1,), lambda: 1) == 1
    assert cache.memo("g", (1,), lambda: 2, packages=("active",)) == 2  # its own entry
    assert cache.memo("g", (1,), lambda: 3, packages=("active",)) == 2 and len(_entries(tmp_path)) == 2


def test_ledger_records_match_with_and_without_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, "off")
    off = accountant_record(1.7, 0.2, 50, 1e-5)
    monkeypatch.setenv(cache.ENV, str(tmp_path / "c"))
    from dpcl.privacy import sgd_accounting

    sgd_accounting._single_phase_epsilon.cache_clear()  # the in-process layer sits in front of the disk
    on = accountant_record(1.7, 0.2, 50, 1e-5)
    sgd_accounting._single_phase_epsilon.cache_clear()
    assert on == accountant_record(1.7, 0.2, 50, 1e-5) == off
    assert len(_entries(tmp_path / "c")) == 1


def test_pld_bounds_are_kept_and_read_back_exactly(tmp_path, monkeypatch):
    from dpcl.privacy import pld

    history = [(1.1, 0.05, 40), (1.1, 0.02, 30, 0.5)]
    monkeypatch.setenv(cache.ENV, "off")
    pld._epsilon.cache_clear()  # the in-process memory in front of the disk cache
    fresh = (pld.epsilon_upper(history, 1e-5), pld.epsilon_lower(history, 1e-5))
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    pld._epsilon.cache_clear()
    assert (pld.epsilon_upper(history, 1e-5), pld.epsilon_lower(history, 1e-5)) == fresh
    stored = [json.loads(p.read_text()) for p in _entries(tmp_path)]
    assert sorted(s["function"] for s in stored) == ["pld_epsilon"] * 2
    assert sorted(s["value"] for s in stored) == sorted(fresh) and fresh[0] > fresh[1] > 0
    for s in stored:  # a planted value is what a later process reads: the entries are really used
        s["value"] = 123.0 if s["args"][2] else 0.5
    for p, s in zip(_entries(tmp_path), stored, strict=True):
        p.write_text(json.dumps(s))
    pld._epsilon.cache_clear()
    assert (pld.epsilon_upper(history, 1e-5), pld.epsilon_lower(history, 1e-5)) == (123.0, 0.5)
    pld._epsilon.cache_clear()
