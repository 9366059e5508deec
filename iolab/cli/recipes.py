"""``iolab recipes``"""
from __future__ import annotations

HELP = "list the built-in recipes with a one-line description each"


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", help="show one recipe in full (its description and tests)")


def run(args) -> int:
    from iolab.engine import recipes
    if args.name:
        recipe = recipes.load(args.name)
        print(f"{recipe.name}: {recipe.description}")
        if recipe.about:
            print()
            print(recipe.about.rstrip())
        print()
        for step in recipe.steps():
            print(f"  {step.id}: " + " ".join(f"{k}={v}" for k, v in step.options.items()))
        if recipe.presets:
            print()
            for name, tests in recipe.presets.items():
                print(f"  preset {name}: {', '.join(tests)}")
        return 0
    known = recipes.available()
    width = max((len(n) for n in known), default=0)
    for name, path in known.items():
        recipe = recipes.load_file(path)
        print(f"{name:<{width}}  {recipe.description}")
    return 0
