# Sourced by run.sh and multi.sh: unpack BUNDLE's binaries into a folder.
# tools/dev.sh gpu-bundle writes them xz-compressed (the bundle travels to the
# GPU machine under a 64 MiB limit; xz is 2.5x smaller than gzip there). A
# machine without the xz tool decompresses with Python's lzma; a bundle of
# older .gz files or plain binaries works too.
unpack_bundle() { # BUNDLE DEST NAME...
  local b=$1 dest=$2 f
  shift 2
  mkdir -p "$dest"
  for f in "$@"; do
    if [ -f "$b/$f.xz" ]; then
      if command -v xz > /dev/null; then xz -dc "$b/$f.xz" > "$dest/$f"
      else python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$b/$f.xz" > "$dest/$f"; fi
    elif [ -f "$b/$f.gz" ]; then gunzip -c "$b/$f.gz" > "$dest/$f"
    elif [ -f "$b/$f" ]; then cp "$b/$f" "$dest/$f"
    else echo "unpack_bundle: no $f, $f.xz or $f.gz in $b (run tools/dev.sh gpu-bundle)" >&2; continue
    fi
    chmod +x "$dest/$f"
  done
}
