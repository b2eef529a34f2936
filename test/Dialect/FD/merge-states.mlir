// fd.merge_states parses, verifies and prints back: one stacked operand, two
// one-state operands (in place), a mask, base-2 lses, every element type.
// RUN: fd-opt %s | fd-opt | FileCheck %s

// CHECK-LABEL: func.func @stacked
// CHECK: fd.merge_states %{{.*}} lses %{{.*}} into %{{.*}}, %{{.*}} : memref<?x4x32x128xf16> lses memref<?x4x32xf32> into memref<?x32x128xf16>, memref<?x32xf32>
func.func @stacked(%v: memref<?x4x32x128xf16>, %s: memref<?x4x32xf32>,
                   %out: memref<?x32x128xf16>, %lse: memref<?x32xf32>) {
  fd.merge_states %v lses %s into %out, %lse
      : memref<?x4x32x128xf16> lses memref<?x4x32xf32>
        into memref<?x32x128xf16>, memref<?x32xf32>
  return
}

// CHECK-LABEL: func.func @in_place
// CHECK: fd.merge_states %[[A:.*]], %{{.*}} lses %[[LA:.*]], %{{.*}} mask %{{.*}} : memref<64xi8> into %[[OUT:.*]], %[[LSE:.*]] {lse_base2}
func.func @in_place(%a: memref<64x1x8x512xbf16>, %b: memref<64x1x8x512xbf16>,
                    %la: memref<64x1x8xf32>, %lb: memref<64x1x8xf32>,
                    %out: memref<64x8x512xbf16>, %lse: memref<64x8xf32>,
                    %mask: memref<64xi8>) {
  fd.merge_states %a, %b lses %la, %lb mask %mask : memref<64xi8>
      into %out, %lse {lse_base2}
      : memref<64x1x8x512xbf16>, memref<64x1x8x512xbf16>
        lses memref<64x1x8xf32>, memref<64x1x8xf32>
        into memref<64x8x512xbf16>, memref<64x8xf32>
  return
}

// CHECK-LABEL: func.func @three_operands_f32
// CHECK: fd.merge_states %{{.*}}, %{{.*}}, %{{.*}} lses
func.func @three_operands_f32(%a: memref<?x2x1x32xf32>, %b: memref<?x1x1x32xf32>,
                              %c: memref<?x5x1x32xf32>, %la: memref<?x2x1xf32>,
                              %lb: memref<?x1x1xf32>, %lc: memref<?x5x1xf32>,
                              %out: memref<?x1x32xf32>, %lse: memref<?x1xf32>) {
  fd.merge_states %a, %b, %c lses %la, %lb, %lc into %out, %lse
      : memref<?x2x1x32xf32>, memref<?x1x1x32xf32>, memref<?x5x1x32xf32>
        lses memref<?x2x1xf32>, memref<?x1x1xf32>, memref<?x5x1xf32>
        into memref<?x1x32xf32>, memref<?x1xf32>
  return
}
