"""The JSON Schemas editors read (schemas/*.schema.json): current with the models, and every shipped
recipe, plan and example valid under its schema as under iolab's own loader."""
import copy
import subprocess
import sys

import pytest
import yaml

from cli_helpers import ROOT
from iolab.devices import plan as setup_plan
from iolab.engine import recipes
from iolab.fleet import batch, inventory as fleet_inventory
from iolab.interop import editor_schemas

jsonschema = pytest.importorskip("jsonschema")

SHIPPED = {
    "recipe": (sorted((ROOT / "recipes").glob("*.yaml")), recipes.load_file),
    "plan": (sorted((ROOT / "examples" / "plans").glob("*.yaml")), setup_plan.load_plan),
    "inventory": ([ROOT / "examples" / "inventory.yaml"], fleet_inventory.load_inventory),
    "batch": ([ROOT / "examples" / "batch-inventory.yaml"], batch.load_inventory),
}


def validator(kind: str):
    schema = editor_schemas.json_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def flat(errors):
    """Errors with those inside anyOf branches (an optional section is "a list, or nothing")."""
    for error in errors:
        yield error
        yield from flat(error.context)


@pytest.mark.parametrize("kind", sorted(editor_schemas.MODELS))
def test_committed_schema_is_what_the_model_gives(kind):
    committed = ROOT / "schemas" / f"{kind}.schema.json"
    assert committed.read_text(encoding="utf-8") == editor_schemas.text(kind), \
        f"{committed} is stale: run .venv/bin/python tools/write-schemas.py"


@pytest.mark.parametrize("kind", sorted(SHIPPED))
def test_every_shipped_file_is_valid_under_its_schema_and_loads(kind):
    files, load = SHIPPED[kind]
    assert files
    check = validator(kind)
    for path in files:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], f"{path}: {errors}"
        assert load(path) is not None


@pytest.mark.parametrize("kind, mutate, where", [
    ("recipe", lambda d: d["tests"][0].update(colour="red"), ["tests", 0]),
    ("recipe", lambda d: d["tests"][0].update(rw="randreed"), ["tests", 0, "rw"]),
    ("plan", lambda d: d["loop_devices"][0].update(sise="1G"), ["loop_devices", 0]),
    ("inventory", lambda d: d["hosts"][0].update(port="http"), ["hosts", 0, "port"]),
    ("batch", lambda d: d["entries"][0].update(isolation="ramdisk"), ["entries", 0, "isolation"]),
])
def test_a_mistake_iolab_refuses_the_schema_flags_too(kind, mutate, where):
    files, _ = SHIPPED[kind]
    path = next(p for p in files if p.stem in ("quick", "two-loops", "inventory", "batch-inventory"))
    data = copy.deepcopy(yaml.safe_load(path.read_text()))
    mutate(data)
    errors = list(flat(validator(kind).iter_errors(data)))
    assert errors and any(list(e.absolute_path)[:len(where)] == where for e in errors), \
        [(list(e.absolute_path), e.message) for e in errors]


def test_the_schema_offers_the_values_an_editor_completes():
    recipe = editor_schemas.json_schema("recipe")
    test = recipe["$defs"]["TestSpec"]["properties"]
    rw = test["rw"]["anyOf"][0]["enum"]
    assert "randread" in rw and "trimwrite" in rw
    assert recipe["properties"]["isolation"]["enum"] == ["cgroup", "hugepages", "direct", "none"]
    assert recipe["additionalProperties"] is False and "fio" in recipe["properties"]
    plan = editor_schemas.json_schema("plan")
    assert plan["$defs"]["FsEntry"]["properties"]["type"]["enum"] == ["ext4", "xfs"]


def test_the_tool_writes_every_schema(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "write-schemas.py"), str(tmp_path)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{k}.schema.json" for k in editor_schemas.MODELS)
    for kind in editor_schemas.MODELS:
        assert (tmp_path / f"{kind}.schema.json").read_text(encoding="utf-8") == editor_schemas.text(kind)
