// RUN: fd-opt %s -split-input-file -fd-schedule-kernels=chip=sm_80 -convert-fd-to-gpu=chip=sm_80 | FileCheck %s

// Holes on tensor cores (top-k lists: pages of one position): a copy of a
// hole reads nothing (cp.async's src-size 0: its slots are zeros), and the
// mask loads the lane's pair of entries again at the top of each step: a
// hole's scores are -inf.

// CHECK-LABEL: func.func @tensor_cores
// CHECK: gpu.func @fd_partial_attention
// CHECK: scf.for %[[STEP:.*]] = {{.*}} iter_args(
// CHECK: %[[FIRST_ENTRY:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[FIRST_IS_KEY:.*]] = arith.cmpi sge, %[[FIRST_ENTRY]], %c0_i32 : i32
// CHECK: %[[SECOND_ENTRY:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK-NEXT: %[[SECOND_IS_KEY:.*]] = arith.cmpi sge, %[[SECOND_ENTRY]], %c0_i32 : i32
// CHECK: %[[V_IS_KEY:.*]] = arith.cmpi sge, %{{.*}}, %c0_i32 : i32
// CHECK: %[[STEP_LIVE:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK: %[[LIVE:.*]] = arith.andi %[[STEP_LIVE]], %[[V_IS_KEY]] : i1
// CHECK-NEXT: %[[BYTES:.*]] = arith.select %[[LIVE]], %c16_i32, %c0_i32 : i32
// CHECK-NEXT: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache =  cg, %[[BYTES]]
// CHECK: arith.andi %{{.*}}, %[[FIRST_IS_KEY]] : i1
// CHECK: arith.andi %{{.*}}, %[[SECOND_IS_KEY]] : i1
func.func @tensor_cores(%q: memref<?x8x64xf16>, %k: memref<?x1x2x64xf16>, %v: memref<?x1x2x64xf16>,
                        %lens: memref<?xi32>, %lists: memref<?x16xi32>,
                        %po: memref<?x8x2x64xf32>, %pl: memref<?x8x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens block_table %lists : memref<?x16xi32> into %po, %pl {block_table_holes}
      : memref<?x8x64xf16>, memref<?x1x2x64xf16>, memref<?x1x2x64xf16>, memref<?xi32> into memref<?x8x2x64xf32>, memref<?x8x2xf32>
  return
}

// -----

// On CUDA cores (f32): each token's entry is carried as it is and clamped
// where it addresses the cache; a hole's row is not loaded (its loads are
// zeros, under an scf.if) and its scores are masked.

// CHECK-LABEL: func.func @cuda_cores
// CHECK: gpu.func @fd_partial_attention
// CHECK: %[[ENTRY:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[PAGE:.*]]:2 = scf.if
// CHECK: %[[IS_KEY:.*]] = arith.cmpi sge, %{{.*}}, %c0 : index
// CHECK: scf.if %[[IS_KEY]] -> (vector<4xf32>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[ZERO:.*]], %[[ZERO]] : vector<4xf32>, vector<4xf32>
// CHECK: arith.andi %{{.*}}, %[[IS_KEY]] : i1
func.func @cuda_cores(%q: memref<?x8x64xf32>, %k: memref<?x1x2x64xf32>, %v: memref<?x1x2x64xf32>,
                      %lens: memref<?xi32>, %lists: memref<?x16xi32>,
                      %po: memref<?x8x2x64xf32>, %pl: memref<?x8x2xf32>) {
  fd.partial_attention %q, %k, %v, %lens block_table %lists : memref<?x16xi32> into %po, %pl {block_table_holes}
      : memref<?x8x64xf32>, memref<?x1x2x64xf32>, memref<?x1x2x64xf32>, memref<?xi32> into memref<?x8x2x64xf32>, memref<?x8x2xf32>
  return
}
