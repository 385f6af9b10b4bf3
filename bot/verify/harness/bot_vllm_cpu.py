"""Make a vLLM source tree run on the CPU platform; also a pytest plugin (``-p bot_vllm_cpu``).

vLLM picks its platform from how it was built. Newer releases honour ``VLLM_TARGET_DEVICE=cpu``
(which the caller sets); older ones only look at the installed package's version string, and a
source tree on ``sys.path`` has none, so the CPU platform is installed before first use.
"""

from __future__ import annotations


def force_cpu_platform() -> None:
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    if not isinstance(platforms._current_platform, CpuPlatform):
        platforms._current_platform = CpuPlatform()


def pytest_load_initial_conftests(early_config, parser, args) -> None:  # noqa: ARG001
    force_cpu_platform()
