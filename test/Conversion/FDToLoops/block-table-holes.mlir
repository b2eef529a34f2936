// RUN: fd-opt %s -split-input-file -convert-fd-to-loops | FileCheck %s

// Holes on loops (top-k lists: pages of one position): each key reads its
// entry once; a negative one is no key, so the row's state goes on
// unchanged and nothing of its position is read (the fold of the key, its
// loads included, is under the scf.if).

// CHECK-LABEL: func @holes
// CHECK-SAME: %[[LISTS:[a-z0-9]+]]: memref<?x16xi32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[MAX:.*]] = %{{.*}}, %[[SUM:.*]] = %{{.*}}) -> (f32, f32) {
// CHECK: %[[ENTRY:.*]] = memref.load %[[LISTS]]
// CHECK-NEXT: %[[PAGE:.*]] = arith.index_cast %[[ENTRY]] : i32 to index
// CHECK: %[[IS_KEY:.*]] = arith.cmpi sge, %[[PAGE]], %{{.*}} : index
// CHECK: %[[STATE:.*]]:2 = scf.if %[[IS_KEY]] -> (f32, f32) {
// CHECK: memref.load %{{.*}} : memref<?x1x2x64xf32>
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[MAX]], %[[SUM]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield %[[STATE]]#0, %[[STATE]]#1 : f32, f32
func.func @holes(%q: memref<?x8x64xf32>, %k: memref<?x1x2x64xf32>, %v: memref<?x1x2x64xf32>,
                 %lens: memref<?xi32>, %lists: memref<?x16xi32>, %out: memref<?x8x64xf32>) {
  fd.attention %q, %k, %v, %lens block_table %lists : memref<?x16xi32> into %out {block_table_holes}
      : memref<?x8x64xf32>, memref<?x1x2x64xf32>, memref<?x1x2x64xf32>, memref<?xi32> into memref<?x8x64xf32>
  return
}
