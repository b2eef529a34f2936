// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_90 -convert-fd-to-gpu=chip=sm_90 | FileCheck %s
// RUN: not fd-opt %s -split-input-file -convert-fd-to-gpu=chip=sm_90 2>&1 >/dev/null | FileCheck %s --check-prefix=MISSING

// The lowering builds the schedule the op carries, chosen by nobody but its
// writer. MQA at D = 64 with 16 rows, f16 (bench/test_kernels.sh compiles
// the same kernel with fd-compile --schedule; RuntimeGPUTest's
// HandSchedule suite runs it): the planner would make one tile of 16 rows,
// two K/V stages, all of q's fragments held, four blocks per SM (@planned,
// which fd-schedule-kernels schedules; ops with a schedule keep theirs);
// this schedule makes two tiles of 8 (two blocks per KV head: the grid's
// y), three stages in workgroup memory (24 rows of accumulators' room: 3 x
// 8 KiB over 1 KiB rows), waits that leave 2 x 3 - 1 = 5 copy groups in
// flight, held q fragments of 2 k-steps and launch bounds of 3 blocks per
// SM.

// CHECK-LABEL: func.func @hand_written
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c2, %{{.*}}) threads in (%c128, %c1, %c1)
// CHECK: gpu.func @fd_partial_attention
// CHECK-SAME: workgroup(%{{.*}} : memref<4x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x24x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x8x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>, nvvm.minctasm = 3 : i32
// Two of q's k-steps are loaded from workgroup memory before the loop, two
// in each step.
// CHECK-COUNT-8: memref.load %{{.*}} : memref<4x32x4xi32, #gpu.address_space<workgroup>>
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 5
// CHECK-COUNT-8: memref.load %{{.*}} : memref<4x32x4xi32, #gpu.address_space<workgroup>>
// CHECK-NOT: memref.load %{{.*}} : memref<4x32x4xi32, #gpu.address_space<workgroup>>
// CHECK: nvvm.cp.async.wait.group 5
// CHECK-NOT: nvvm.cp.async.wait.group {{[1-46-9]}}
// CHECK: nvvm.cp.async.wait.group 0

func.func @hand_written(%q: memref<?x16x64xf16>, %k: memref<?x?x1x64xf16>, %v: memref<?x?x1x64xf16>, %lens: memref<?xi32>, %po: memref<?x16x4x64xf32>, %pl: memref<?x16x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<form = tensor_cores, rows_per_tile = 8, row_tiles = 2, threads = 128, min_blocks_per_sm = 3, held_query_steps = 2, stages = 3>}
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x4x64xf32>, memref<?x16x4xf32>
  return
}

// -----

// CUDA cores by hand where the planner takes tensor cores: the rows of a
// KV head (GQA-4) in 4 tiles of 1.
// CHECK-LABEL: func.func @cuda_cores_by_hand
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c8, %{{.*}})
// CHECK: workgroup(%{{.*}} : memref<1x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x1x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x1x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {fd.math_units = "cuda_cores"
// CHECK-NOT: nvvm.minctasm
// CHECK-NOT: nvvm.cp.async
func.func @cuda_cores_by_hand(%q: memref<?x8x128xbf16>, %k: memref<?x?x2x128xbf16>, %v: memref<?x?x2x128xbf16>, %lens: memref<?xi32>, %po: memref<?x8x4x128xf32>, %pl: memref<?x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {schedule = #fd.schedule<form = cuda_cores, rows_per_tile = 1, row_tiles = 4, threads = 128>}
      : memref<?x8x128xbf16>, memref<?x?x2x128xbf16>, memref<?x?x2x128xbf16>, memref<?xi32> into memref<?x8x4x128xf32>, memref<?x8x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @planned
// CHECK: gpu.launch_func @fd_partial_attention::@fd_partial_attention blocks in (%c4, %c1, %{{.*}})
// CHECK: workgroup(%{{.*}} : memref<4x32x4xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x16x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<4x16x2xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-SAME: nvvm.minctasm = 4 : i32
// CHECK: nvvm.cp.async.wait.group 3
// CHECK-NOT: nvvm.cp.async.wait.group 5

// Without fd-schedule-kernels (or fd-split-kv) the lowering has nothing to
// build from, and says so; the ops with a schedule lower.
// MISSING-NOT: error
// MISSING: error: 'fd.partial_attention' op convert-fd-to-gpu: the op has no #fd.schedule (its kernel's tiling and launch bounds): fd-split-kv attaches the one it planned with, fd-schedule-kernels the planner's to split IR written by hand
// MISSING-NOT: error
func.func @planned(%q: memref<?x16x64xf16>, %k: memref<?x?x1x64xf16>, %v: memref<?x?x1x64xf16>, %lens: memref<?xi32>, %po: memref<?x16x4x64xf32>, %pl: memref<?x16x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl
      : memref<?x16x64xf16>, memref<?x?x1x64xf16>, memref<?x?x1x64xf16>, memref<?xi32> into memref<?x16x4x64xf32>, memref<?x16x4xf32>
  return
}
