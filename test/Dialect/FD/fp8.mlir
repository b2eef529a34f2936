// RUN: fd-opt %s -split-input-file | fd-opt -split-input-file | FileCheck %s
// RUN: fd-opt %s -split-input-file --mlir-print-op-generic | fd-opt -split-input-file | FileCheck %s

// FP8 caches (f8E4M3FN, f8E5M2) under f16/bf16/f32 queries, with their
// scales per tensor or per (token, KV head).

// CHECK-LABEL: func @per_tensor_e4m3
// CHECK-SAME: %[[KS:[a-z0-9]+]]: memref<1xf32>, %[[VS:[a-z0-9]+]]: memref<1xf32>
// CHECK: fd.attention {{.*}} k_scale %[[KS]] : memref<1xf32> v_scale %[[VS]] : memref<1xf32> into
// CHECK-SAME: memref<?x32x128xf16>, memref<?x?x8x128xf8E4M3FN>, memref<?x?x8x128xf8E4M3FN>
func.func @per_tensor_e4m3(%q: memref<?x32x128xf16>, %k: memref<?x?x8x128xf8E4M3FN>,
                           %v: memref<?x?x8x128xf8E4M3FN>, %lens: memref<?xi32>,
                           %ks: memref<1xf32>, %vs: memref<1xf32>,
                           %out: memref<?x32x128xf16>) {
  fd.attention %q, %k, %v, %lens k_scale %ks : memref<1xf32> v_scale %vs : memref<1xf32> into %out
      : memref<?x32x128xf16>, memref<?x?x8x128xf8E4M3FN>, memref<?x?x8x128xf8E4M3FN>,
        memref<?xi32> into memref<?x32x128xf16>
  return
}

// -----

// Per (token, KV head), HND: [B, Hkv, Lmax].
// CHECK-LABEL: func @per_token_e5m2_hnd
// CHECK: fd.attention {{.*}} k_scale %{{.*}} : memref<2x4x?xf32> v_scale %{{.*}} : memref<2x4x?xf32>
// CHECK-SAME: memref<2x4x?x64xf8E5M2>
func.func @per_token_e5m2_hnd(%q: memref<2x16x64xbf16>, %k: memref<2x4x?x64xf8E5M2>,
                              %v: memref<2x4x?x64xf8E5M2>, %lens: memref<2xi32>,
                              %ks: memref<2x4x?xf32>, %vs: memref<2x4x?xf32>,
                              %out: memref<2x16x64xbf16>) {
  fd.attention %q, %k, %v, %lens k_scale %ks : memref<2x4x?xf32> v_scale %vs : memref<2x4x?xf32> into %out {kv_layout = #fd.kv_layout<HND>}
      : memref<2x16x64xbf16>, memref<2x4x?x64xf8E5M2>, memref<2x4x?x64xf8E5M2>,
        memref<2xi32> into memref<2x16x64xbf16>
  return
}

// -----

// A paged pool scales per (page, slot, KV head); the split form too.
// CHECK-LABEL: func @paged_partial
// CHECK: fd.partial_attention {{.*}} block_table %{{.*}} : memref<?x?xi32> k_scale %{{.*}} : memref<?x16x2xf32> v_scale %{{.*}} : memref<?x16x2xf32> into
func.func @paged_partial(%q: memref<?x8x64xf32>, %k: memref<?x16x2x64xf8E4M3FN>,
                         %v: memref<?x16x2x64xf8E4M3FN>, %lens: memref<?xi32>,
                         %table: memref<?x?xi32>, %ks: memref<?x16x2xf32>,
                         %vs: memref<?x16x2xf32>, %po: memref<?x8x4x64xf32>,
                         %pl: memref<?x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> k_scale %ks : memref<?x16x2xf32> v_scale %vs : memref<?x16x2xf32> into %po, %pl
      : memref<?x8x64xf32>, memref<?x16x2x64xf8E4M3FN>, memref<?x16x2x64xf8E4M3FN>,
        memref<?xi32> into memref<?x8x4x64xf32>, memref<?x8x4xf32>
  return
}
