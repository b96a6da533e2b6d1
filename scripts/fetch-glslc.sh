#!/usr/bin/env bash
# Fetches a recent glslc (Debian unstable's, with the C and C++ runtimes it needs) into
# .glslc/, for the shaders an older glslc cannot compile: matmul_bf16x6.comp needs
# GL_EXT_bfloat16 and GL_KHR_cooperative_matrix (glslang 15.3 or later; Debian 12 has 11).
# Nothing is installed into the system: .glslc/glslc runs the binary with its own loader.
#   scripts/fetch-glslc.sh && GLSLC=.glslc/glslc make shaders
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.glslc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$dest/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main" \
  > "$tmp/sources.list"
o="-o Dir::Etc::SourceList=$tmp/sources.list -o Dir::Etc::SourceParts=/dev/null
   -o Dir::State::Lists=$tmp/lists -o APT::Architecture=amd64 -o Dir::Cache::pkgcache=
   -o Dir::Cache::srcpkgcache="
apt-get $o update -qq
(cd "$dest/debs" && apt-get $o download glslc libshaderc1 libc6 libstdc++6 libgcc-s1 2>/dev/null)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/root"; done
cat > "$dest/glslc" <<'WRAP'
#!/bin/sh
lib=$(dirname "$(readlink -f "$0")")/root/usr/lib/x86_64-linux-gnu
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$lib/../../bin/glslc" "$@"
WRAP
chmod +x "$dest/glslc"
"$dest/glslc" --version | head -1
