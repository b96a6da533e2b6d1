#!/usr/bin/env bash
# Installs what the test suite needs from the system: the Vulkan loader, Mesa's software
# Vulkan device (lavapipe, so the GPU backend runs without a GPU), the Khronos validation
# layer, the GLSL compiler and the SPIR-V tools (the validator checks patched modules).
# Debian/Ubuntu only; elsewhere it says what to install.
set -euo pipefail
pkgs="libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc spirv-tools"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: no apt-get here; install the Vulkan loader and a Vulkan driver" \
       "(on Debian: $pkgs) for the GPU tests" >&2
  exit 0
fi
if dpkg -s $pkgs >/dev/null 2>&1; then
  exit 0                       # all installed already
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
