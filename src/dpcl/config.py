"""Workflow configuration: JSON-schema validation with defaults and readable errors.

The schema lives in ``config/schema.yaml``; errors name the key, the bad value and
what is allowed.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = (
    Path(__file__).resolve().parent / "resources" / "config.schema.yaml"
)  # config/schema.yaml links here


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and what is allowed."""


def _with_defaults(validator_class):
    validate_props = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _fill_additional_defaults(instance: Any, schema: dict) -> None:
    """Defaults inside ``additionalProperties`` sub-schemas (datasets, backbones, benchmarks)."""
    if not isinstance(instance, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key in instance:
            _fill_additional_defaults(instance[key], sub)
    add = schema.get("additionalProperties")
    if isinstance(add, dict):
        for key, value in instance.items():
            if key in schema.get("properties", {}):
                continue
            if isinstance(value, dict):
                for prop, sub in add.get("properties", {}).items():
                    if "default" in sub and prop not in value:
                        value[prop] = copy.deepcopy(sub["default"])


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for p in error.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _description(root: dict, error: jsonschema.ValidationError) -> str | None:
    """The description of the deepest schema node on the error's schema path."""
    node, found = root, None
    for part in error.absolute_schema_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and "description" in node:
            found = node["description"]
    return found


def _unknown_keys(error: jsonschema.ValidationError) -> str:
    """``unknown key 'epsilon' at top level; did you mean 'epsilons'?`` for each key the schema
    does not know (never the whole instance: defaults filled in would read as the user's)."""
    import difflib

    allowed = sorted((error.schema if isinstance(error.schema, dict) else {}).get("properties", {}))
    where = f"in '{_path(error)}'" if error.absolute_path else "at top level"
    out = []
    for key in sorted(set(error.instance) - set(allowed), key=str):
        close = difflib.get_close_matches(str(key), allowed, n=1)
        out.append(
            f"unknown key {key!r} {where}"
            + (f"; did you mean {close[0]!r}?" if close else "")
            + f" (allowed keys: {', '.join(allowed)})"
        )
    return "\n  ".join(out)


def _allowed(error: jsonschema.ValidationError, root: dict) -> str:
    s = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "propertyNames":
        names = s.get("propertyNames", {})
        allowed = names.get("enum") or f"names matching {names.get('pattern')}"
        return f"unknown name; allowed: {allowed}"
    desc = _description(root, error)
    if desc:
        return f"{error.message}. Allowed: {' '.join(desc.split())}"
    return error.message


def _allows_string(node: dict, value: str) -> bool:
    """Whether schema ``node`` accepts the string ``value`` as it is (type string, a const or enum)."""
    if value in node.get("enum", ()) or node.get("const") == value:
        return True
    types = node.get("type")
    if types is not None:
        return "string" in ([types] if isinstance(types, str) else types)
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        return any(_allows_string(b, value) for b in branches)
    return not node  # an unconstrained node keeps strings


def coerce_to_schema(value: Any, node: dict) -> Any:
    """``value`` with strings turned into YAML values where schema ``node`` does not take a string.

    Snakemake parses a structured ``--config`` value (``seeds=[0]``, ``tuning={"trials": 3}``)
    with YAML's BaseLoader, which keeps every scalar a string; re-reading those strings with the
    safe loader, guided by the schema (a path or a name stays a string), gives the types a config
    file would have.
    """
    if isinstance(value, str):
        if _allows_string(node, value):
            return value
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            return value
    if isinstance(value, list):
        return [coerce_to_schema(v, node.get("items", {})) for v in value]
    if isinstance(value, dict):
        props, extra = node.get("properties", {}), node.get("additionalProperties")
        return {
            k: coerce_to_schema(v, props.get(k, extra if isinstance(extra, dict) else {}))
            for k, v in value.items()
        }
    return value


def _normalise(cfg: dict) -> None:
    cfg["epsilons"] = [math.inf if str(e).lower() in ("inf", ".inf") else float(e) for e in cfg["epsilons"]]


@functools.cache
def _schema_file(path: str) -> dict:
    """The schema file at ``path``, parsed once per process (libyaml's loader where PyYAML has it: the same
    result in less time); :func:`load_schema` hands out copies, so a job that asks for several blocks'
    defaults parses it once."""
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_schema(schema_path: str | Path = SCHEMA_PATH) -> dict:
    """The config schema, its list of learners generated from the learner registry
    (:mod:`dpcl.learners.registry`): a learner declared there is a valid ``learners`` entry."""
    from .learners import registry

    schema = copy.deepcopy(_schema_file(str(Path(schema_path).resolve())))
    node = schema["properties"]["learners"]
    node["items"] = {"enum": list(registry.names())}
    listed = "; ".join(f"{s.name} ({s.display})" for s in registry.specs())
    node["description"] = f"{node.get('description', '').rstrip()} Registered: {listed}."
    return schema


def block_defaults(name: str, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """The defaults of top-level config block ``name`` (what a config that leaves it out gets)."""
    schema = load_schema(schema_path)
    if name not in schema["properties"]:
        raise ConfigError(f"no config block {name!r}")
    block: dict = {}
    _with_defaults(jsonschema.Draft202012Validator)(schema["properties"][name]).validate(block)
    return block


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate ``config`` in place (filling defaults) and return it; raise :class:`ConfigError`.
    The learners of ``learner_modules`` (a user's own) are registered first, so that they may be named."""
    from .learners import registry

    modules = config.get("learner_modules") or []
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise ConfigError(
            f"config key 'learner_modules': expected a list of file or module names, got {modules!r}"
        )
    try:
        registry.load_modules(modules)
    except ValueError as err:
        raise ConfigError(f"config key 'learner_modules': {err}") from None
    schema = load_schema(schema_path)
    config.update(coerce_to_schema(config, schema))  # --config values arrive as strings
    # YAML reads 'inf' as a string and '.inf' as a float: accept both spellings.
    if isinstance(config.get("epsilons"), list):
        config["epsilons"] = [
            "inf" if isinstance(e, float) and math.isinf(e) and e > 0 else e for e in config["epsilons"]
        ]
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors[:10]:
            if err.validator == "additionalProperties":
                lines.append(_unknown_keys(err))
                continue
            lines.append(
                f"config key '{_path(err)}': value {err.instance!r} is invalid: {_allowed(err, schema)}"
            )
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    _fill_additional_defaults(config, schema)
    for name, bench in config["benchmarks"].items():
        for ref, pool in (("dataset", "datasets"), ("backbone", "backbones")):
            values = benchmark_datasets(config, name) if ref == "dataset" else [bench[ref]]
            missing = [v for v in values if v not in config[pool]]
            if missing:
                raise ConfigError(
                    f"config key 'benchmarks.{name}.{ref}': value {missing[0]!r} is not defined; "
                    f"allowed: {sorted(config[pool])}"
                )
    for key, methods in (
        ("head_label_methods", config.get("head_label_methods")),
        ("agem.label_methods", config.get("agem", {}).get("label_methods")),
        ("baseline_label_methods", config.get("baseline_label_methods")),
        ("nonprivate_label_methods", config.get("nonprivate_label_methods")),
    ):
        extra = [m for m in (methods or []) if m not in config["label_methods"]]
        if extra:
            raise ConfigError(
                f"config key '{key}': values {extra} are not in label_methods; "
                f"allowed: a subset of {config['label_methods']}"
            )
    for name, bench in config["benchmarks"].items():
        for key, pool in (
            ("learners", config["learners"]),
            ("label_methods", config["label_methods"]),
            ("epsilons", [eps_tag(_eps(e)) for e in config["epsilons"]]),
        ):
            own = bench.get(key) or []
            extra = [v for v in own if (eps_tag(_eps(v)) if key == "epsilons" else v) not in pool]
            if extra:
                raise ConfigError(
                    f"config key 'benchmarks.{name}.{key}': values {extra} are not in the global {key}; "
                    f"allowed: a subset of {config[key]}"
                )
    _check_active(config)
    _check_datasets(config)
    _check_benchmark_shapes(config)
    _check_weights(config)
    _check_tuning_sizes(config)
    _normalise(config)
    return config


class ConfigWarning(UserWarning):
    """A valid configuration that probably does not do what its author expects."""


#: config keys of the user's own data (``datasets.<name>.format``), refused on a built-in data set
OWN_DATA_KEYS = ("format", "root", "test_fraction", "public_label_names")


def _check_datasets(config: dict) -> None:
    """Every ``datasets`` key names a built-in data set or declares the user's own data (readable
    root, public classes); Public Labels on own data need a public label universe, and own
    precomputed features have no images for the FiLM learners."""
    from .data.datasets import DatasetError
    from .data.label_space import parse_label_method
    from .data.registry import base_name, is_own, spec

    for name, cfg in config["datasets"].items():
        if not is_own(cfg):
            try:
                base_name(name)
            except ValueError as e:
                raise ConfigError(f"config key 'datasets.{name}': {e}") from None
            extra = [k for k in OWN_DATA_KEYS if cfg.get(k) is not None]
            if extra:
                raise ConfigError(
                    f"config key 'datasets.{name}.{extra[0]}': only for your own data (a block with "
                    f"'format'); {name} is a built-in data set"
                )
            continue
        if not cfg.get("root"):
            raise ConfigError(
                f"config key 'datasets.{name}.root': missing; give the folder (image_folder) or the "
                ".npz file or folder (npz) of your data"
            )
        try:
            spec(name, cfg)
        except DatasetError as e:  # its message names the key (datasets.<name>.<key>: ...) or a path
            key, sep, rest = str(e).partition(": ")
            if not (sep and key.startswith(f"datasets.{name}") and " " not in key):
                key, rest = f"datasets.{name}", str(e)
            raise ConfigError(f"config key '{key}': {rest}") from None
    for bench_name, bench in config["benchmarks"].items():
        for d in benchmark_datasets(config, bench_name):
            cfg = config["datasets"][d]
            if not is_own(cfg):
                continue
            methods = bench.get("label_methods") or config["label_methods"]
            public = [m for m in methods if parse_label_method(m).kind == "public"]
            if public and not cfg.get("public_label_names"):
                raise ConfigError(
                    f"config key 'datasets.{d}.public_label_names': label methods {public} (benchmark "
                    f"{bench_name}) draw from a public label universe, which your own data set {d} does "
                    f"not have: set datasets.{d}.public_label_names to a text file with one class name "
                    f"per line (every class folder's name among them), or drop {public} from "
                    f"benchmarks.{bench_name}.label_methods"
                )
            film = [lr for lr in (bench.get("learners") or config["learners"]) if lr.endswith("_film")]
            if film and cfg["format"] == "npz":
                raise ConfigError(
                    f"config key 'benchmarks.{bench_name}.learners': {film} train on images, and "
                    f"datasets.{d} (format npz) holds precomputed features; use the feature learners"
                )


def _check_benchmark_shapes(config: dict) -> None:
    """Task counts against the data sets' published class counts, and ``-parent`` label methods
    against their hierarchies, before any job runs."""
    import warnings

    from .data.label_space import parse_label_method
    from .data.registry import BUILTIN, spec

    for name, bench in config["benchmarks"].items():
        entries = {}
        for d in benchmark_datasets(config, name):
            entry = spec(d, config["datasets"][d])
            entries[entry.name] = entry  # variants of one data set are checked once
        n_tasks, scenario = int(bench.get("n_tasks", 5)), bench.get("scenario", "disjoint")
        for kind, entry in sorted(entries.items()):
            key, n_classes = f"benchmarks.{name}.n_tasks", entry.n_classes
            if scenario == "datasets":
                if len(entry.composite) != n_tasks:
                    composites = ", ".join(
                        f"dataset {k} with n_tasks {len(e.composite)}"
                        for k, e in BUILTIN.items()
                        if e.composite
                    )
                    raise ConfigError(
                        f"config key '{key}': scenario 'datasets' is 5-datasets' (one task per source "
                        f"data set of a composite): {composites}, got {kind} with {n_tasks}"
                    )
            elif scenario != "permuted" and n_tasks > n_classes:
                raise ConfigError(
                    f"config key '{key}': value {n_tasks} is more tasks than {kind}'s {n_classes} classes"
                )
            elif scenario == "disjoint" and n_classes % n_tasks:
                q, r = divmod(n_classes, n_tasks)  # np.array_split: the first r tasks get one class more
                sizes = "/".join(str(q + (t < r)) for t in range(n_tasks))
                warnings.warn(
                    f"config key '{key}': the {n_classes} classes of {kind} do not split evenly into "
                    f"{n_tasks} tasks: {sizes} classes per task",
                    ConfigWarning,
                    stacklevel=3,
                )
            methods = bench.get("label_methods") or config["label_methods"]
            parent = [m for m in methods if parse_label_method(m).remap == "parent"]
            if parent and not entry.hierarchy:
                with_hierarchy = [k for k, e in BUILTIN.items() if e.hierarchy]
                raise ConfigError(
                    f"config key 'benchmarks.{name}.label_methods': {parent} map labels to parents in "
                    f"a class hierarchy, which {kind} does not have (only {', '.join(with_hierarchy)})"
                )


def _check_weights(config: dict) -> None:
    """A checkpoint path in ``backbones.<name>.weights`` must exist before any job runs."""
    from .backbones import WEIGHT_SOURCES

    for name, b in config["backbones"].items():
        w = b.get("weights", "timm-pretrained")
        if w not in WEIGHT_SOURCES and not Path(w).expanduser().is_file():
            raise ConfigError(
                f"config key 'backbones.{name}.weights': checkpoint file {w!r} does not exist "
                f"(relative paths are read from the working directory, {Path.cwd()}); use an existing "
                f"file or one of {list(WEIGHT_SOURCES)}"
            )


def benchmark_dataset(config: dict, name: str, seed: int) -> str:
    """The data set (a ``datasets`` key) benchmark ``name`` reads at run seed ``seed``: its
    ``dataset``, with ``{seed}`` filled in (a variant per seed, e.g. ImageNet-R's split)."""
    return str(config["benchmarks"][name]["dataset"]).replace("{seed}", str(int(seed)))


def benchmark_datasets(config: dict, name: str) -> list[str]:
    """Every data set benchmark ``name`` reads over its seeds (one unless ``dataset`` has ``{seed}``)."""
    seeds = config["benchmarks"][name].get("seeds") or config.get("seeds") or [0]
    return list(dict.fromkeys(benchmark_dataset(config, name, s) for s in seeds))


def _check_tuning_sizes(config: dict) -> None:
    """Tuned learning rates are scaled by nominal sizes (App. D.1): every benchmark's data set needs one."""
    if not (config.get("tuning") or {}).get("enabled"):
        return
    from .training.tuning_protocol import nominal_train_size, public_tune_per_class

    for name in sorted({d for b in config["benchmarks"] for d in benchmark_datasets(config, b)}):
        try:
            nominal_train_size(name, config["datasets"][name])
            if config["tuning"].get("protocol", "public") == "public":
                public_tune_per_class(name, config["datasets"][name])
        except ValueError as e:
            raise ConfigError(f"config key 'datasets.{name}.nominal_train_size': {e}") from None


def _check_active(config: dict) -> None:
    """The active-learning block's references and budgets ([Schwethelm2025])."""
    act = config.get("active") or {}
    if not act.get("enabled"):
        return
    for ref, pool in (("dataset", "datasets"), ("backbone", "backbones")):
        if act[ref] not in config[pool]:
            raise ConfigError(
                f"config key 'active.{ref}': value {act[ref]!r} is not defined; "
                f"allowed: {sorted(config[pool])}"
            )
    pairs = [(act["epsilon"], act["selection_epsilon"])] + [
        tuple(p) for p in act.get("table2_settings") or []
    ]
    pairs += [(act["epsilon"], s) for s in act.get("fig5_selection_epsilons") or []]
    for eps, sel in pairs:
        if not sel < eps:
            raise ConfigError(
                f"config key 'active': selection_epsilon {sel} must be below the total epsilon {eps} "
                "(a never-selected record pays all of it)"
            )


def _eps(v) -> float:
    return math.inf if str(v).lower() in ("inf", ".inf") else float(v)


def load_config(path: str | Path) -> dict:
    """Read a YAML config file and validate it; a missing, unreadable or non-YAML file is a
    :class:`ConfigError` naming the path."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        reason = "is a directory" if p.is_dir() else "does not exist" if not p.exists() else e.strerror
        raise ConfigError(f"config file {str(p)!r} {reason}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {' '.join(str(e).split())}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"config file {str(p)!r} holds a {type(data).__name__}, not a mapping of config keys"
        )
    return validate_config(data or {})


def eps_tag(epsilon: float) -> str:
    """File-name tag of a budget: ``1``, ``8``, ``0.5``, ``inf``."""
    return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


def parse_eps_tag(tag: str) -> float:
    return math.inf if tag == "inf" else float(tag)


def run_targets(epsilons: list, delta: float) -> dict[str, dict]:
    """Every run's target (ε, δ) by ε tag, from the validated config: the learners take their
    target from here, never from a file a run read. ε = inf has δ = 0."""
    out = {}
    for e in epsilons:
        eps = parse_eps_tag(str(e).lower().lstrip(".")) if isinstance(e, str) else float(e)
        out[eps_tag(eps)] = {
            "epsilon": "inf" if math.isinf(eps) else eps,
            "delta": 0.0 if math.isinf(eps) else float(delta),
        }
    return out
