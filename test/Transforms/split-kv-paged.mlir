// RUN: fd-opt %s -fd-split-kv="report=true" -verify-diagnostics | FileCheck %s

// A paged cache: 64 pages per sequence of 256 positions = 16384 positions;
// the block table is passed through, the plan uses max_pages * page_size.

// CHECK-LABEL: func @paged
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<1x64xi32>
// CHECK: fd.partial_attention {{.*}} block_table %[[BT]] : memref<1x64xi32> into {{.*}} : {{.*}} into memref<1x32x19x128xf32>, memref<1x32x19xf32>
// CHECK: fd.merge
func.func @paged(%q: memref<1x32x128xf16>, %k: memref<?x256x8x128xf16>, %v: memref<?x256x8x128xf16>,
                 %lens: memref<1xi32>, %table: memref<1x64xi32>, %out: memref<1x32x128xf16>) {
  // expected-remark @below {{fd-split-kv: auto: B=1 Hkv=8 Lmax=16384 -> splits=19 blocks=152 waves=1 wave-efficiency=0.38 chunk=863}}
  fd.attention %q, %k, %v, %lens block_table %table : memref<1x64xi32> into %out
      : memref<1x32x128xf16>, memref<?x256x8x128xf16>, memref<?x256x8x128xf16>,
        memref<1xi32> into memref<1x32x128xf16>
  return
}

// Top-k lists (pages of one position with holes): the partial attention
// keeps block_table_holes; the splits divide the lists' 2048 entries,
// whatever the pool holds (64 sequences of 128 heads fill the GPU unsplit).

// CHECK-LABEL: func @top_k
// CHECK: fd.partial_attention {{.*}} block_table %{{.*}} : memref<64x2048xi32> into %{{.*}}, %{{.*}} {block_table_holes, scale = {{.*}}, schedule = #fd.schedule<{{.*}}>} : {{.*}} into memref<64x128x1x512xf32>, memref<64x128x1xf32>
// CHECK-NEXT: fd.merge
func.func @top_k(%q: memref<64x128x576xbf16>, %kv: memref<100000x1x1x576xbf16>,
                 %lens: memref<64xi32>, %lists: memref<64x2048xi32>,
                 %out: memref<64x128x512xbf16>) {
  // expected-remark @below {{fd-split-kv: auto: B=64 Hkv=1 Lmax=2048 -> splits=1}}
  fd.attention %q, %kv, %lens block_table %lists : memref<64x2048xi32> into %out {block_table_holes, scale = 0.1 : f32}
      : memref<64x128x576xbf16>, memref<100000x1x1x576xbf16>, memref<64xi32> into memref<64x128x512xbf16>
  return
}
