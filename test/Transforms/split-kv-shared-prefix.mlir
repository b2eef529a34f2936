// RUN: fd-opt %s -split-input-file -fd-split-kv=num-splits=3 | FileCheck %s
// RUN: fd-opt %s -split-input-file -fd-split-kv | FileCheck %s --check-prefix=AUTO

// A shared prefix (cascade): the partial attention reads the prefix's one
// sequence and places each query sequence after it by its suffix length,
// so it keeps suffix_lens; the merge combines each query sequence's splits
// and knows nothing of the prefix.

// CHECK-LABEL: func @shared_prefix
// CHECK-SAME: %[[LENS:[a-z0-9]+]]: memref<1xi32>, %[[SUFFIX:[a-z0-9]+]]: memref<4xi32>
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %[[LENS]] suffix_lens %[[SUFFIX]] : memref<4xi32> into %{{.*}}, %{{.*}} {schedule = #fd.schedule<{{.*}}>, window_left = 100 : i64} :
// CHECK-SAME: memref<4x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<4x8x3x64xf32>, memref<4x8x3xf32>
// CHECK-NEXT: fd.merge %{{[^ ]+}}, %{{[^ ]+}} into %{{[^ ]+}}, %{{[^ ]+}} : memref<4x8x3x64xf32>, memref<4x8x3xf32> into memref<4x8x64xf16>, memref<4x8xf32>
// CHECK-NOT: suffix_lens
// CHECK: return
func.func @shared_prefix(%q: memref<4x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>,
                         %lens: memref<1xi32>, %suffix: memref<4xi32>,
                         %out: memref<4x8x64xf16>, %lse: memref<4x8xf32>) {
  fd.attention %q, %k, %v, %lens suffix_lens %suffix : memref<4xi32> into %out, %lse {window_left = 100}
      : memref<4x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>,
        memref<1xi32> into memref<4x8x64xf16>, memref<4x8xf32>
  return
}

// -----

// Planning (sm_90 by default: 132 SMs, a wave of 132 x 4 = 528 blocks):
// 64 query sequences continuing one prefix of 32768 keys, Llama-3-8B-like
// (Hq = 32 over Hkv = 8, D = 128, f16). A block computes the rows of
// max(1, 16 / (group 4 x Lq 1)) = 4 sequences (a 16-row tensor-core tile),
// so the 64 sequences take 16 blocks along the batch: 16 x 8 = 128 blocks
// a split, and the planner takes 2 splits (256 blocks), as it does for an
// unshared batch of 16 (fd-plan --batch 16 --num-kv-heads 8 --max-len
// 32768 --num-q-heads 32 --head-dim 128).

// AUTO-LABEL: func @planned
// AUTO: fd.partial_attention {{.*}} suffix_lens {{.*}} into memref<64x32x2x128xf32>, memref<64x32x2xf32>
// AUTO-NEXT: fd.merge {{.*}} : memref<64x32x2x128xf32>, memref<64x32x2xf32> into memref<64x32x128xf16>
func.func @planned(%q: memref<64x32x128xf16>, %k: memref<1x32768x8x128xf16>, %v: memref<1x32768x8x128xf16>,
                   %lens: memref<1xi32>, %suffix: memref<64xi32>, %out: memref<64x32x128xf16>) {
  fd.attention %q, %k, %v, %lens suffix_lens %suffix : memref<64xi32> into %out
      : memref<64x32x128xf16>, memref<1x32768x8x128xf16>, memref<1x32768x8x128xf16>,
        memref<1xi32> into memref<64x32x128xf16>
  return
}

// -----

// The same 64 sequences each with a cache of its own (batch 64, no
// suffix_lens): a block per sequence and KV head, 64 x 8 = 512 blocks, 0.97
// of a wave already without splitting: 1 split.

// AUTO-LABEL: func @unshared
// AUTO: fd.partial_attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} into {{.*}} into memref<64x32x1x128xf32>, memref<64x32x1xf32>
func.func @unshared(%q: memref<64x32x128xf16>, %k: memref<64x32768x8x128xf16>, %v: memref<64x32768x8x128xf16>,
                    %lens: memref<64xi32>, %out: memref<64x32x128xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<64x32x128xf16>, memref<64x32768x8x128xf16>, memref<64x32768x8x128xf16>,
        memref<64xi32> into memref<64x32x128xf16>
  return
}
