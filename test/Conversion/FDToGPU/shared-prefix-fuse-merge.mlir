// RUN: fd-opt %s -fd-split-kv="num-splits=3 chip=sm_80" -convert-fd-to-gpu="chip=sm_80 fuse-merge=1" -verify-diagnostics

// A fused merge counts finished blocks per (sequence, KV head), and the
// last block of each merges that sequence's rows; a shared prefix's block
// computes the rows of several sequences (here 4: 32 query heads over 8 KV
// heads, Lq = 1), which those counters do not follow. fuse-merge refuses
// it, pointing at the merge kernel.
func.func @fused(%q: memref<?x32x128xf16>, %k: memref<1x?x8x128xf16>, %v: memref<1x?x8x128xf16>,
                 %lens: memref<1xi32>, %suffix: memref<?xi32>, %out: memref<?x32x128xf16>) {
  // expected-error @+1 {{convert-fd-to-gpu: fuse-merge: a shared prefix's partial kernel takes the query sequences in groups along its grid, which the fused merge's counters per (sequence, KV head) do not follow; use the merge kernel (no fuse-merge)}}
  fd.attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %out
      : memref<?x32x128xf16>, memref<1x?x8x128xf16>, memref<1x?x8x128xf16>,
        memref<1xi32> into memref<?x32x128xf16>
  return
}
