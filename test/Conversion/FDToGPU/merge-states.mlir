// convert-fd-to-gpu on fd.merge_states: one kernel per op, its parameters
// named (states_i, then state_lses_i, output, lse, mask) for the runtime;
// blocks (rows, heads), a thread per output element (512-wide rows too); the
// masked form branches on the row's flag; the lses are weighed in base 2
// (ex2), an empty state's loads read its lse's address instead of its row
// (a select, no branch; one load an element, aligned to its size), and
// thread 0
// writes the lse after a barrier (every thread has read the lses: in place
// is safe).
// The PTX pipeline builds it.
// RUN: fd-opt %s -convert-fd-to-gpu=chip=sm_90 | FileCheck %s
// RUN: fd-opt %s -fd-lower-to-ptx | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @stacked
// CHECK: %[[ROWS:.*]] = memref.dim %arg2, %c0 : memref<?x32x128xf16>
// CHECK: gpu.launch_func @fd_merge_states::@fd_merge_states blocks in (%[[ROWS]], %c32, %c1) threads in (%c128, %c1, %c1)
// CHECK-SAME: {fd.grid_symbols = ["batch", "", ""]}
func.func @stacked(%v: memref<?x4x32x128xf16>, %s: memref<?x4x32xf32>,
                   %out: memref<?x32x128xf16>, %lse: memref<?x32xf32>) {
  fd.merge_states %v lses %s into %out, %lse
      : memref<?x4x32x128xf16> lses memref<?x4x32xf32>
        into memref<?x32x128xf16>, memref<?x32xf32>
  return
}

// CHECK-LABEL: func.func @in_place
// CHECK: gpu.launch_func @fd_merge_states_1::@fd_merge_states_1 blocks in (%c64, %c8, %c1) threads in (%c512, %c1, %c1)
func.func @in_place(%a: memref<64x1x8x512xbf16>, %b: memref<64x1x8x512xbf16>,
                    %la: memref<64x1x8xf32>, %lb: memref<64x1x8xf32>,
                    %mask: memref<64xi8>) {
  %out = memref.collapse_shape %a [[0, 1], [2], [3]]
      : memref<64x1x8x512xbf16> into memref<64x8x512xbf16>
  %lse = memref.collapse_shape %la [[0, 1], [2]]
      : memref<64x1x8xf32> into memref<64x8xf32>
  fd.merge_states %a, %b lses %la, %lb mask %mask : memref<64xi8>
      into %out, %lse {lse_base2}
      : memref<64x1x8x512xbf16>, memref<64x1x8x512xbf16>
        lses memref<64x1x8xf32>, memref<64x1x8xf32>
        into memref<64x8x512xbf16>, memref<64x8xf32>
  return
}

// CHECK: gpu.func @fd_merge_states(%{{.*}}) kernel attributes {fd.params = ["states_0", "state_lses_0", "output", "lse"]
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: %[[LSE:.*]] = llvm.getelementptr
// CHECK: llvm.load %[[LSE]] {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// CHECK: %[[ROW:.*]] = llvm.getelementptr
// CHECK: %[[READ:.*]] = llvm.select %{{.*}}, %[[LSE]], %[[ROW]] : i1, !llvm.ptr<1>
// CHECK: llvm.load %[[READ]] {alignment = 2 : i64} : !llvm.ptr<1> -> f16
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK: gpu.func @fd_merge_states_1(%{{.*}}) kernel attributes {fd.params = ["states_0", "states_1", "state_lses_0", "state_lses_1", "output", "lse", "mask"]
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// CHECK: %[[FLAG:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i8
// CHECK: %[[MERGES:.*]] = arith.cmpi ne, %[[FLAG]]
// CHECK: scf.if %[[MERGES]] {
// CHECK-COUNT-2: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<1> -> bf16
// CHECK: gpu.barrier

// PTX: gpu.binary @fd_merge_states
// PTX: gpu.binary @fd_merge_states_1
