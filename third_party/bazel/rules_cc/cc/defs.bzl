"""Offline @rules_cc: forwards the C++ rules to Bazel's native ones.

Bazel 4.2.3 (Debian's bazel-bootstrap) loads @rules_cc//cc:defs.bzl from
@bazel_tools when it analyses test targets; the real rules_cc would be
downloaded. These macros only forward to the native rules built into Bazel.
"""

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)
