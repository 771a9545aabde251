"""Checks that BUILD targets and Python files agree (module, test, deps).

Run `python -m tools.check_bazel_targets [--add_missing]` from the root.
"""

import argparse
import ast
import os
import sys
from pathlib import Path

from tools import build_files, python_imports

# Where the package, its binaries and its tests live; setup.py is pip's.
SCANNED_DIRS = ("keras_transformer", "export", "benchmarks", "tests")
IGNORED_ROOT_FILES = frozenset({"setup.py"})
# Files that pytest's name pattern matches but that are libraries.
LIBRARY_TEST_FILES = frozenset({"tests/test_case.py"})
BUILD_NAMES = ("BUILD", "BUILD.bazel")
_LOAD = 'load("//tools:pytest.bzl", "pytest_test")'
_HEADER = 'package(default_visibility = ["//visibility:public"])\n'


def _skipped(path: Path) -> bool:
    return any(p == "__pycache__" or p.startswith(".") for p in path.parts)


def find_sources(root: Path) -> list[str]:
    """Lists the Python files that need a target, relative to `root`."""
    found = [p for p in root.glob("*.py") if p.name not in IGNORED_ROOT_FILES]
    for directory in SCANNED_DIRS:
        found += (root / directory).rglob("*.py")
    relative = (p.relative_to(root) for p in found)
    return sorted(p.as_posix() for p in relative if not _skipped(p))


def find_build_files(root: Path) -> list[Path]:
    """Lists the BUILD files of the root, scanned and tools/ packages."""
    found = [root / name for name in BUILD_NAMES if (root / name).is_file()]
    for directory in SCANNED_DIRS + ("tools",):
        for name in BUILD_NAMES:
            found += (root / directory).rglob(name)
    return sorted(p for p in found if not _skipped(p.relative_to(root)))


def is_test_file(source: str) -> bool:
    """Whether pytest collects `source` as a test file (its default names)."""
    name = source.rsplit("/", 1)[-1]
    is_test_name = name.startswith("test_") or name.endswith("_test.py")
    return (
        source.startswith("tests/")
        and is_test_name
        and source not in LIBRARY_TEST_FILES
    )


def _parse(root: Path, source: str) -> ast.Module:
    """The syntax tree of `source`; empty if it does not parse (reported)."""
    try:
        return ast.parse((root / source).read_text(encoding="utf-8"), source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def has_slow_mark(root: Path, source: str) -> bool:
    """Whether `source` uses `pytest.mark.slow` (on a test or `pytestmark`)."""
    tree = _parse(root, source)
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "slow"
        and ast.unparse(node.value) in ("pytest.mark", "mark")
        for node in ast.walk(tree)
    )


def _is_empty_init(root: Path, source: str) -> bool:
    """An `__init__.py` with no code, which Bazel creates by itself."""
    if not source.endswith("__init__.py"):
        return False
    body = _parse(root, source).body
    is_docstring = body and isinstance(body[0], ast.Expr)
    return len(body) <= (1 if is_docstring else 0)


def _top_level_names(root: Path, sources: list[str]) -> frozenset[str]:
    names = {s.split("/")[0].removesuffix(".py") for s in sources}
    return frozenset(names | {"tools"})


def _short_label(label: str, package: str) -> str:
    """`//pkg:x` as `:x` inside package `pkg`, `//a/b:b` as `//a/b`."""
    if label.startswith(f"//{package}:"):
        return label.removeprefix(f"//{package}")
    package_part, _, name = label.partition(":")
    return package_part if package_part.endswith(f"/{name}") else label


def _expected_label(source: str) -> str:
    """The label the pattern gives `source`: //dir:stem, //dir for init."""
    directory, _, file_name = source.rpartition("/")
    stem = file_name.removesuffix(".py")
    name = directory.rsplit("/", 1)[-1] if stem == "__init__" else stem
    return f"//{directory}:{name}"


def _label_order(label: str) -> tuple:
    """buildifier's order: ":x" labels, then "//a" ones by package, name."""
    package, _, name = label.partition(":")
    return (not label.startswith(":"), package, name)


def _suggest_target(root, source, owners, imports) -> tuple[str, str]:
    """The BUILD file and rule call to add for `source`, deps from imports."""
    directory, _, file_name = source.rpartition("/")
    name = _expected_label(source).rpartition(":")[2]
    text = (root / source).read_text(encoding="utf-8")
    if is_test_file(source):
        rule, extra = "pytest_test", '    size = "medium",\n'
        if has_slow_mark(root, source):
            extra = '    size = "large",\n    tags = ["slow"],\n'
    else:
        is_main = "__main__" in text and not source.startswith(SCANNED_DIRS[0])
        rule, extra = ("py_binary" if is_main else "py_library"), ""
    labels = {
        owners[i.path][0] if i.path in owners else _expected_label(i.path)
        for i in imports
    }
    deps = sorted(
        {_short_label(d, directory) for d in labels} - {f":{name}"},
        key=_label_order,
    )
    deps_text = "".join(f'        "{d}",\n' for d in deps)
    deps_text = f"    deps = [\n{deps_text}    ],\n" if deps else ""
    build = f"{directory}/BUILD" if directory else "BUILD"
    return build, (
        f'{rule}(\n    name = "{name}",\n{extra}'
        f'    srcs = ["{file_name}"],\n{deps_text})\n'
    )


def _index(root: Path):
    """Sources, BUILD targets, owners of each file, imports of each source."""
    sources = find_sources(root)
    parsed = build_files.read_build_files(root, find_build_files(root))
    names = _top_level_names(root, sources)
    owners: dict[str, list[str]] = {}
    for target in parsed.targets:
        for src in target.srcs:
            owners.setdefault(src, []).append(target.label)
    imports, unparsed = {}, []
    for source in sources:
        try:
            imports[source] = python_imports.workspace_imports(
                root, source, names
            )
        except SyntaxError as error:
            imports[source] = []
            unparsed.append(
                f"{source}:{error.lineno}: not valid Python, so its imports "
                f"are unknown: fix the file. Received: error={error.msg}"
            )
    return sources, parsed, owners, imports, unparsed


def missing_targets(root: Path) -> list[tuple[str, str, str]]:
    """Lists (source, BUILD file, rule call to add) for files with no target."""
    sources, _, owners, imports, _ = _index(root)
    return [
        (source, *_suggest_target(root, source, owners, imports[source]))
        for source in sources
        if source not in owners and not _is_empty_init(root, source)
    ]


def add_missing_targets(root: Path) -> list[str]:
    """Appends the suggested targets to the BUILD files; returns the files.

    A new BUILD file starts with the header of the pattern (the pytest_test
    load and public visibility); review the deps of what was added.
    """
    added = []
    for source, build, rule_call in missing_targets(root):
        path = root / build
        text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
        if "pytest_test(" in rule_call and _LOAD not in text:
            text = f"{_LOAD}\n\n{text}"
        path.write_text(f"{text.rstrip()}\n\n{rule_call}", encoding="utf-8")
        added.append(source)
    return added


def check(root: Path) -> list[str]:
    """Returns the drift between the BUILD files and the files of `root`.

    Args:
        root: the workspace root (the directory of WORKSPACE).

    Returns:
        One message per problem, each naming the file (and BUILD line) and
        the fix; empty when targets and files agree.
    """
    sources, parsed, owners, imports, unparsed = _index(root)
    problems = list(parsed.problems) + unparsed
    packages = {p.parent for p in find_build_files(root)}
    for directory in sorted({(root / s).parent for s in sources} - packages):
        relative = directory.relative_to(root).as_posix()
        problems.append(
            f"{relative}/ has Python files but no BUILD file: create "
            f"{relative}/BUILD (one BUILD per package directory)."
        )
    for source, build, rule_call in missing_targets(root):
        rule_call = rule_call.rstrip()
        problems.append(
            f"{source} has no Bazel target: add to {build}:\n{rule_call}"
        )
    for target in parsed.targets:
        problems += _check_target(root, target, owners, imports)
        for dep in target.deps:
            if dep.startswith("//") and dep not in parsed.all_labels:
                problems.append(
                    f"{target.where}: {target.label} depends on {dep}, "
                    "which no BUILD file defines: fix or remove the label."
                )
    return problems


def _check_target(root, target, owners, imports) -> list[str]:
    problems = []
    existing = [s for s in target.srcs if (root / s).is_file()]
    for src in sorted(set(target.srcs) - set(existing)):
        problems.append(
            f"{target.where}: {target.label} lists {src}, which does not "
            "exist: remove it from `srcs` (or remove the target)."
        )
    for src in existing:
        if is_test_file(src) and not target.is_test:
            problems.append(
                f"{target.where}: {src} is a test file but {target.label} is "
                f"a {target.rule}: declare it with pytest_test."
            )
    if target.is_test:
        if target.size is None:
            problems.append(
                f"{target.where}: {target.label} has no `size`: add "
                'size = "medium" (or "small"/"large": its timeout).'
            )
        slow_files = [s for s in existing if has_slow_mark(root, s)]
        if slow_files and "slow" not in target.tags:
            problems.append(
                f"{target.where}: {slow_files[0]} has @pytest.mark.slow tests"
                f' but {target.label} lacks tags = ["slow"]: add it.'
            )
        if not slow_files and "slow" in target.tags:
            problems.append(
                f'{target.where}: {target.label} is tagged "slow" but its '
                "files have no @pytest.mark.slow test: remove the tag."
            )
    missing: dict[str, tuple[str, python_imports.Import]] = {}
    visible = set(target.deps) | {target.label}
    for src in existing:
        for item in imports.get(src, ()):
            if item.path not in owners:  # reported as a file without target
                continue
            if item.path in target.srcs or visible & set(owners[item.path]):
                continue
            missing.setdefault(owners[item.path][0], (src, item))
    for label, (src, item) in sorted(missing.items()):
        problems.append(
            f"{target.where}: {target.label} imports {item.module} "
            f"({src}:{item.line}) but does not depend on {label}: add it "
            "to `deps`."
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    """Prints the drift of the workspace; returns 1 if there is any."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=Path,
        # `bazel run` starts in the runfiles, and says where the source is.
        default=os.environ.get(
            "BUILD_WORKSPACE_DIRECTORY", Path(__file__).resolve().parents[1]
        ),
        help="workspace root (default: this file's workspace)",
    )
    parser.add_argument(
        "--add_missing",
        action="store_true",
        help="append the suggested targets to the BUILD files, then check",
    )
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if args.add_missing:
        for source in add_missing_targets(root):
            print(f"Added a target for {source}; review its deps.")
    problems = check(root)
    for problem in problems:
        print(problem, end="\n\n")
    if problems:
        print(f"{len(problems)} problems: see the pattern at the top of BUILD.")
        return 1
    print(f"BUILD targets match the Python files of {root}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
