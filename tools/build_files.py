"""Reads the Python targets of BUILD files with `ast`, for the drift check.

BUILD files are Starlark (Python syntax): parsed, never executed.
"""

import ast
import dataclasses
from pathlib import Path

# Rules whose `srcs` hold Python files: the native ones and our macro.
PYTHON_RULES = ("py_library", "py_binary", "py_test", "pytest_test")
TEST_RULES = ("py_test", "pytest_test")


@dataclasses.dataclass(frozen=True)
class Target:
    """One Python target of a BUILD file.

    Attributes:
        build_file: the BUILD file, relative to the workspace root.
        line: the line of the rule call in `build_file`.
        rule: the rule, one of `PYTHON_RULES`.
        package: the Bazel package ("" for the root package).
        name: the target name.
        srcs: the source files, relative to the workspace root.
        deps: the dependencies as absolute labels (`//package:name`).
        tags: the tags.
        size: the test size, or None when the rule call gives none.
    """

    build_file: str
    line: int
    rule: str
    package: str
    name: str
    srcs: tuple[str, ...]
    deps: tuple[str, ...]
    tags: tuple[str, ...]
    size: str | None

    @property
    def label(self) -> str:
        return f"//{self.package}:{self.name}"

    @property
    def where(self) -> str:
        return f"{self.build_file}:{self.line}"

    @property
    def is_test(self) -> bool:
        return self.rule in TEST_RULES


@dataclasses.dataclass(frozen=True)
class BuildFiles:
    """What the BUILD files of a workspace define.

    Attributes:
        targets: the Python targets (see `PYTHON_RULES`).
        all_labels: the labels of every rule with a `name`, of any kind.
        problems: what could not be read, as `file:line: message` strings.
    """

    targets: tuple[Target, ...]
    all_labels: frozenset[str]
    problems: tuple[str, ...]


def absolute_label(label: str, package: str) -> str:
    """Returns `label` as `//package:name`, or unchanged if external.

    Args:
        label: a label as written in a BUILD file of `package`: ":x", "x",
            "//a/b:c", "//a/b" (short for "//a/b:b") or "@repo//...".
        package: the package of that BUILD file.

    Returns:
        The absolute label; labels of other repositories are unchanged.
    """
    if label.startswith("@"):
        return label
    if label.startswith("//"):
        package_part, _, name = label[2:].partition(":")
        return f"//{package_part}:{name or package_part.rsplit('/', 1)[-1]}"
    return f"//{package}:{label.removeprefix(':')}"


def label_to_path(label: str, package: str) -> str:
    """Returns the workspace-relative path of a source file label."""
    absolute = absolute_label(label, package)
    package_part, _, name = absolute[2:].partition(":")
    return f"{package_part}/{name}" if package_part else name


def _literal(call: ast.Call, key: str, where: str, problems: list[str]):
    """Returns the literal value of keyword `key` of `call`, or None."""
    for keyword in call.keywords:
        if keyword.arg == key:
            try:
                return ast.literal_eval(keyword.value)
            except ValueError:
                problems.append(
                    f"{where}: `{key}` must be a literal (a string or a list "
                    "of strings) for tools/check_bazel_targets.py to read "
                    "it; write the value out. Received: "
                    f"{key}={ast.unparse(keyword.value)}"
                )
    return None


def _read_build_file(root: Path, build_path: Path, targets, labels, problems):
    build_file = build_path.relative_to(root).as_posix()
    package = build_path.parent.relative_to(root).as_posix()
    package = "" if package == "." else package
    text = build_path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=build_file)
    except SyntaxError as error:
        problems.append(f"{build_file}:{error.lineno}: cannot parse: {error}")
        return
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        where = f"{build_file}:{node.lineno}"
        name = _literal(node, "name", where, problems)
        if isinstance(name, str):
            labels.add(f"//{package}:{name}")
        if node.func.id not in PYTHON_RULES:
            continue
        values = {
            key: _literal(node, key, where, problems) or ()
            for key in ("srcs", "deps", "tags")
        }
        if not isinstance(name, str):
            problems.append(
                f"{where}: {node.func.id} needs a literal `name`. "
                f"Received: name={name!r}"
            )
            continue
        targets.append(
            Target(
                build_file=build_file,
                line=node.lineno,
                rule=node.func.id,
                package=package,
                name=name,
                srcs=tuple(label_to_path(s, package) for s in values["srcs"]),
                deps=tuple(absolute_label(d, package) for d in values["deps"]),
                tags=tuple(values["tags"]),
                size=_literal(node, "size", where, problems),
            )
        )


def read_build_files(root: Path, build_paths: list[Path]) -> BuildFiles:
    """Reads the Python targets of `build_paths`.

    Args:
        root: the workspace root.
        build_paths: the BUILD files to read, under `root`.

    Returns:
        The targets, every defined label, and the problems found.
    """
    targets: list[Target] = []
    labels: set[str] = set()
    problems: list[str] = []
    for build_path in sorted(build_paths):
        _read_build_file(root, build_path, targets, labels, problems)
    return BuildFiles(tuple(targets), frozenset(labels), tuple(problems))
