// RUN: fd-opt %s -split-input-file -fd-split-kv="num-splits=4" | FileCheck %s --check-prefix=SPLIT
// RUN: fd-opt %s -split-input-file -fd-split-kv="batch=1 max-len=32768 report=1" 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: fd-opt %s -split-input-file -fd-schedule-kernels | FileCheck %s --check-prefix=SM90
// RUN: not fd-opt %s -fd-schedule-kernels=chip=sm_70 2>&1 | FileCheck %s --check-prefix=CHIP

// fd-split-kv gives the partial op the schedule it planned with: the
// fd.attention's own when it has one.
// SPLIT-LABEL: func @hand_written
// SPLIT: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, stages = 3>}
// The split planner counts the kernel's blocks with its two row tiles per
// KV head (and paces them by its launch bounds, 3 per SM: 396 a wave),
// where the planner's schedule has one tile.
// REPORT: remark: fd-split-kv: auto: B=1 Hkv=1 Lmax=32768 -> splits=171 blocks=342 waves=1
// REPORT: remark: fd-split-kv: auto: B=1 Hkv=1 Lmax=32768 -> splits=240 blocks=240 waves=1
func.func @hand_written(%q: memref<1x16x64xf16>, %k: memref<1x32768x1x64xf16>, %v: memref<1x32768x1x64xf16>, %lens: memref<1xi32>, %o: memref<1x16x64xf16>) {
  fd.attention %q, %k, %v, %lens into %o {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, stages = 3>}
      : memref<1x16x64xf16>, memref<1x32768x1x64xf16>, memref<1x32768x1x64xf16>, memref<1xi32> into memref<1x16x64xf16>
  return
}

// -----

// Without one, the planner's on fd-split-kv's chip (sm_90).
// SPLIT-LABEL: func @planned
// SPLIT: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 4, stages = 2>}
func.func @planned(%q: memref<1x16x64xf16>, %k: memref<1x32768x1x64xf16>, %v: memref<1x32768x1x64xf16>, %lens: memref<1xi32>, %o: memref<1x16x64xf16>) {
  fd.attention %q, %k, %v, %lens into %o
      : memref<1x16x64xf16>, memref<1x32768x1x64xf16>, memref<1x32768x1x64xf16>, memref<1xi32> into memref<1x16x64xf16>
  return
}

// -----

// fd-schedule-kernels: the planner's on its chip for a partial op without
// one, a partial op with one keeps it, fd.attention is left alone.
// SM80-LABEL: func @split_by_hand
// SM80: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 4, stages = 2>}
// SM80: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 4, row_tiles = 4, threads = 128>}
// SM80: fd.attention
// SM80-NOT: schedule
// SM90-LABEL: func @split_by_hand
// SM90: fd.partial_attention {{.*}} {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 4, held_query_steps = 4, stages = 2>}
// CHIP: error: fd-schedule-kernels: chip 'sm_70' is not supported: expected sm_80, sm_86, sm_89, sm_90
func.func @split_by_hand(%q: memref<?x16x64xf16>, %k: memref<?x?x1x64xf16>, %v: memref<?x?x1x64xf16>, %lens: memref<?xi32>, %po: memref<?x16x4x64xf32>, %pl: memref<?x16x4xf32>, %o: memref<?x16x64xf16>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x4x64xf32>, memref<?x16x4xf32>
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 4, row_tiles = 4, threads = 128>}
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x4x64xf32>, memref<?x16x4xf32>
  fd.attention %q, %k, %v, %lens into %o
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x64xf16>
  return
}
