"""``iolab recipes``"""
from __future__ import annotations

HELP = "list the built-in recipes with a one-line description each"


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="show one recipe in full (its description and tests)")
    parser.add_argument("--preset", help="with NAME: show the tests as this preset runs them (e.g. sqlbench: "
                                         "quick, published)")


def run(args) -> int:
    from iolab.engine import recipes
    if args.name:
        recipe = recipes.load(args.name)
        print(f"{recipe.name}: {recipe.description}")
        if recipe.about:
            print()
            print(recipe.about.rstrip())
        print()
        for line in _test_lines(recipe, args.preset):
            print(line)
        if recipe.presets:
            print()
            for name, tests in recipe.presets.items():
                print(f"  preset {name}: {', '.join(tests)}")
        return 0
    if args.preset:
        from iolab.core.errors import IolabError
        raise IolabError("--preset needs a recipe NAME", context="iolab recipes")
    known = recipes.available()
    width = max((len(n) for n in known), default=0)
    for name, path in known.items():
        recipe = recipes.load_file(path)
        print(f"{name:<{width}}  {recipe.description}")
    return 0


def _test_lines(recipe, preset: str | None) -> list[str]:
    """The recipe's tests: as fio jobs, or as its engine describes them (the ``describe_tests(recipe)``
    registered with the engine in :mod:`iolab.engine.registry`, e.g. sql-bench's tests with their tables
    and rows), or else by their descriptions (an engine's tests are not all fio jobs: bonnie's putc is a
    Python loop)."""
    from iolab.engine import registry
    describe = registry.describe_tests(recipe.engine)
    if describe is not None:
        return describe(recipe.with_overrides(preset=preset))
    if preset is not None:
        recipe = recipe.with_overrides(preset=preset)
    if recipe.engine != "fio":  # its own steps (Python workers, fio for some): each test as the recipe says
        width = max((len(t.name) for t in recipe.tests), default=0)
        return [f"  {t.name:<{width}}  {t.description or ''}".rstrip() for t in recipe.tests]
    return [f"  {step.id}: " + " ".join(f"{k}={v}" for k, v in step.options.items()) for step in recipe.steps()]
