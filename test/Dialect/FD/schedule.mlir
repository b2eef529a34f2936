// RUN: fd-opt %s | FileCheck %s
// RUN: fd-opt %s | fd-opt | FileCheck %s

// #fd.schedule round-trips; min_blocks_per_sm, held_query_steps and stages
// default to 0 and are printed only when set.

// CHECK-LABEL: func @tensor_cores
// CHECK: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, stages = 3>}
func.func @tensor_cores(%q: memref<?x16x64xf16>, %k: memref<?x?x1x64xf16>, %v: memref<?x?x1x64xf16>, %lens: memref<?xi32>, %po: memref<?x16x4x64xf32>, %pl: memref<?x16x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<stages = 3, form = tensor_cores, row_tiles = 2, rows_per_tile = 8, threads = 128, held_query_steps = 2, min_blocks_per_sm = 3>}
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x4x64xf32>, memref<?x16x4xf32>
  return
}

// CHECK-LABEL: func @cuda_cores
// CHECK: fd.attention {{.*}} {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 3, row_tiles = 3, threads = 128>}
func.func @cuda_cores(%q: memref<?x8x128xf32>, %k: memref<?x?x1x128xf32>, %v: memref<?x?x1x128xf32>, %lens: memref<?xi32>, %o: memref<?x8x128xf32>) {
  fd.attention %q, %k, %v, %lens into %o {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 3, row_tiles = 3, threads = 128, stages = 0>}
      : memref<?x8x128xf32>, memref<?x?x1x128xf32>, memref<?x?x1x128xf32>, memref<?xi32> into memref<?x8x128xf32>
  return
}

// cluster_ctas defaults to 1 and is printed only when set.
// CHECK-LABEL: func @cluster
// CHECK: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = 128, cluster_ctas = 4>}
// CHECK-LABEL: func @one_block_a_chunk
// CHECK: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = 128>}
func.func @cluster(%q: memref<?x8x128xf32>, %k: memref<?x?x1x128xf32>, %v: memref<?x?x1x128xf32>, %lens: memref<?xi32>, %po: memref<?x8x4x128xf32>, %pl: memref<?x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<cluster_ctas = 4, form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = 128>}
      : memref<?x8x128xf32>, memref<?x?x1x128xf32>, memref<?x?x1x128xf32>, memref<?xi32> into memref<?x8x4x128xf32>, memref<?x8x4xf32>
  return
}
func.func @one_block_a_chunk(%q: memref<?x8x128xf32>, %k: memref<?x?x1x128xf32>, %v: memref<?x?x1x128xf32>, %lens: memref<?xi32>, %po: memref<?x8x4x128xf32>, %pl: memref<?x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 8, row_tiles = 1, threads = 128, cluster_ctas = 1>}
      : memref<?x8x128xf32>, memref<?x?x1x128xf32>, memref<?x?x1x128xf32>, memref<?xi32> into memref<?x8x4x128xf32>, memref<?x8x4xf32>
  return
}
