// RUN: fd-opt %s -fd-split-kv="num-splits=128 chip=sm_80" -convert-fd-to-gpu="chip=sm_80 fuse-merge=1" -verify-diagnostics

// 256 rows (MQA f32, D = 256, Lq = 8) x 128 splits of weights would take the
// partial kernel past 48 KB of static shared memory: an error naming the
// split count that fits (the accumulators hold 28 splits' weights per row).
func.func @too_many_weights(%q: memref<?x8x32x256xf32>,
                            %k: memref<?x?x1x256xf32>,
                            %v: memref<?x?x1x256xf32>, %lens: memref<?xi32>,
                            %out: memref<?x8x32x256xf32>) {
  // expected-error @+1 {{convert-fd-to-gpu: fuse-merge: the merge's weights (256 rows x 128 splits) take the partial kernel to 161984 bytes of static shared memory, over 49152; use at most 24 splits, or the merge kernel (no fuse-merge)}}
  fd.attention %q, %k, %v, %lens into %out
      : memref<?x8x32x256xf32>, memref<?x?x1x256xf32>, memref<?x?x1x256xf32>,
        memref<?xi32> into memref<?x8x32x256xf32>
  return
}
