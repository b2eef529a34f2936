// fd-split-kv on MLA's absorbed decode (one latent cache, the values its
// first 512 columns) and on values apart from keys: the partials are sized
// by D_v, the value cache (or its absence) passes to the partial op with
// the split-value tensor-core schedule it was planned with, and the PTX
// pipeline builds both.
// RUN: fd-opt %s -fd-split-kv="num-splits=4" | FileCheck %s
// RUN: fd-opt %s -fd-split-kv="batch=2 max-len=8192 report=true" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: fd-opt %s -fd-lower-to-ptx="num-splits=4" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: func @latent
// CHECK: %[[WS:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xi8>
// CHECK: %[[PO:.*]] = memref.view %[[WS]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x16x4x512xf32>
// CHECK: %[[PL:.*]] = memref.view %[[WS]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x16x4xf32>
// The 16 heads one tile whose warps share each step's keys: 9 of q's 36
// k-steps held a warp, four stages of 8 latent rows.
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}} into %[[PO]], %[[PL]] {scale = 0.0721687824 : f32, schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 3, held_query_steps = 9, stages = 4>} :
// CHECK-SAME: memref<?x16x576xbf16>, memref<?x?x1x576xbf16>, memref<?xi32> into memref<?x16x4x512xf32>, memref<?x16x4xf32>
// CHECK: fd.merge %[[PO]], %[[PL]] into
// AUTO: remark: fd-split-kv: auto: B=2 Hkv=1 Lmax=8192 -> splits=
// AUTO-SAME: workspace=
// PTX: gpu.binary @fd_partial_attention
// PTX: gpu.binary @fd_merge
// PTX: gpu.binary @fd_partial_attention_1
// PTX: gpu.binary @fd_merge_1
func.func @latent(%q: memref<?x16x576xbf16>, %kv: memref<?x?x1x576xbf16>,
                  %lens: memref<?xi32>, %out: memref<?x16x512xbf16>) {
  fd.attention %q, %kv, %lens into %out {scale = 0.0721687824 : f32}
      : memref<?x16x576xbf16>, memref<?x?x1x576xbf16>, memref<?xi32>
        into memref<?x16x512xbf16>
  return
}

// CHECK-LABEL: func @value_dim_apart
// D_v sizes the workspace: 2 * 8 * 4 * (128 + 1) * 4 bytes.
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<33024xi8>
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 4, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 3, stages = 4>} :
// CHECK-SAME: memref<2x8x192xf16>, memref<2x?x2x192xf16>, memref<2x?x2x128xf16>, memref<2xi32> into memref<2x8x4x128xf32>, memref<2x8x4xf32>
func.func @value_dim_apart(%q: memref<2x8x192xf16>, %k: memref<2x?x2x192xf16>,
                           %v: memref<2x?x2x128xf16>, %lens: memref<2xi32>,
                           %out: memref<2x8x128xf16>) {
  fd.attention %q, %k, %v, %lens into %out
      : memref<2x8x192xf16>, memref<2x?x2x192xf16>, memref<2x?x2x128xf16>,
        memref<2xi32> into memref<2x8x128xf16>
  return
}
