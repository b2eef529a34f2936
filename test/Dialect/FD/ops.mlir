// RUN: fd-opt %s | fd-opt | FileCheck %s
// RUN: fd-opt %s --mlir-print-op-generic | fd-opt | FileCheck %s

// CHECK-LABEL: func @decode_nhd
// CHECK-SAME: (%[[Q:.*]]: memref<?x32x128xf16>, %[[K:.*]]: memref<?x?x8x128xf16>, %[[V:.*]]: memref<?x?x8x128xf16>, %[[L:.*]]: memref<?xi32>, %[[O:.*]]: memref<?x32x128xf16>, %[[LSE:.*]]: memref<?x32xf32>)
func.func @decode_nhd(%q: memref<?x32x128xf16>, %k: memref<?x?x8x128xf16>,
                      %v: memref<?x?x8x128xf16>, %lens: memref<?xi32>,
                      %out: memref<?x32x128xf16>, %lse: memref<?x32xf32>) {
  // CHECK: fd.attention %[[Q]], %[[K]], %[[V]], %[[L]] into %[[O]], %[[LSE]] :
  // CHECK-SAME: memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>, memref<?xi32> into memref<?x32x128xf16>, memref<?x32xf32>
  fd.attention %q, %k, %v, %lens into %out, %lse
      : memref<?x32x128xf16>, memref<?x?x8x128xf16>, memref<?x?x8x128xf16>,
        memref<?xi32> into memref<?x32x128xf16>, memref<?x32xf32>
  return
}

// CHECK-LABEL: func @speculative_hnd_bf16
func.func @speculative_hnd_bf16(%q: memref<2x4x8x64xbf16>, %k: memref<2x1x?x64xbf16>,
                                %v: memref<2x1x?x64xbf16>, %lens: memref<2xi32>,
                                %out: memref<2x4x8x64xbf16>) {
  // CHECK: fd.attention {{.*}} {kv_layout = #fd.kv_layout<HND>, scale = 5.000000e-01 : f32}
  // CHECK-SAME: memref<2x4x8x64xbf16>, memref<2x1x?x64xbf16>
  fd.attention %q, %k, %v, %lens into %out {kv_layout = #fd.kv_layout<HND>, scale = 0.5 : f32}
      : memref<2x4x8x64xbf16>, memref<2x1x?x64xbf16>, memref<2x1x?x64xbf16>,
        memref<2xi32> into memref<2x4x8x64xbf16>
  return
}

// CHECK-LABEL: func @split_form
// CHECK-SAME: %[[PO:[a-z0-9]+]]: memref<?x32x16x128xf32>, %[[PL:[a-z0-9]+]]: memref<?x32x16xf32>
func.func @split_form(%q: memref<?x32x128xf32>, %k: memref<?x?x8x128xf32>,
                      %v: memref<?x?x8x128xf32>, %lens: memref<?xi32>,
                      %po: memref<?x32x16x128xf32>, %pl: memref<?x32x16xf32>,
                      %out: memref<?x32x128xf32>) {
  // CHECK: fd.partial_attention {{.*}} into %[[PO]], %[[PL]] {chunk_length = 256 : i64}
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {chunk_length = 256 : i64}
      : memref<?x32x128xf32>, memref<?x?x8x128xf32>, memref<?x?x8x128xf32>,
        memref<?xi32> into memref<?x32x16x128xf32>, memref<?x32x16xf32>
  // CHECK: fd.merge %[[PO]], %[[PL]] into %{{.*}} : memref<?x32x16x128xf32>, memref<?x32x16xf32> into memref<?x32x128xf32>
  fd.merge %po, %pl into %out
      : memref<?x32x16x128xf32>, memref<?x32x16xf32> into memref<?x32x128xf32>
  return
}

// CHECK-LABEL: func @merge_speculative_with_lse
func.func @merge_speculative_with_lse(%po: memref<1x2x4x3x256xf32>, %pl: memref<1x2x4x3xf32>,
                                      %out: memref<1x2x4x256xf16>, %lse: memref<1x2x4xf32>) {
  // CHECK: fd.merge {{.*}} into %{{.*}}, %{{.*}} : memref<1x2x4x3x256xf32>, memref<1x2x4x3xf32> into memref<1x2x4x256xf16>, memref<1x2x4xf32>
  fd.merge %po, %pl into %out, %lse
      : memref<1x2x4x3x256xf32>, memref<1x2x4x3xf32> into memref<1x2x4x256xf16>, memref<1x2x4xf32>
  return
}

// CHECK-LABEL: func @paged
// CHECK-SAME: %[[BT:[a-z0-9]+]]: memref<?x?xi32>
func.func @paged(%q: memref<?x4x8x64xbf16>, %k: memref<?x16x2x64xbf16>, %v: memref<?x16x2x64xbf16>,
                 %lens: memref<?xi32>, %table: memref<?x?xi32>, %out: memref<?x4x8x64xbf16>,
                 %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %[[BT]] : memref<?x?xi32> into %{{.*}} : memref<?x4x8x64xbf16>, memref<?x16x2x64xbf16>
  fd.attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> into %out
      : memref<?x4x8x64xbf16>, memref<?x16x2x64xbf16>, memref<?x16x2x64xbf16>,
        memref<?xi32> into memref<?x4x8x64xbf16>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %[[BT]] : memref<?x?xi32> into
  fd.partial_attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> into %po, %pl
      : memref<?x4x8x64xbf16>, memref<?x16x2x64xbf16>, memref<?x16x2x64xbf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}

// CHECK-LABEL: func @window_soft_cap
func.func @window_soft_cap(%q: memref<?x4x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                           %lens: memref<?xi32>, %out: memref<?x4x8x64xf16>,
                           %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  // CHECK: fd.attention {{.*}} {logits_soft_cap = 5.000000e+01 : f32, window_left = 4096 : i64}
  fd.attention %q, %k, %v, %lens into %out {window_left = 4096, logits_soft_cap = 50.0 : f32}
      : memref<?x4x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x4x8x64xf16>
  // CHECK: fd.partial_attention {{.*}} {chunk_length = 64 : i64, window_left = 1 : i64}
  fd.partial_attention %q, %k, %v, %lens into %po, %pl {window_left = 1, chunk_length = 64}
      : memref<?x4x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}

// CHECK-LABEL: func @sinks
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<8xf32>
func.func @sinks(%q: memref<?x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                 %lens: memref<?xi32>, %table: memref<?x?xi32>, %s: memref<8xf32>,
                 %out: memref<?x8x64xf16>, %lse: memref<?x8xf32>,
                 %po: memref<?x8x3x64xf32>, %pl: memref<?x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks %[[S]] : memref<8xf32> into %{{.*}}, %{{.*}} {window_left = 128 : i64}
  fd.attention %q, %k, %v, %lens sinks %s : memref<8xf32> into %out, %lse {window_left = 128}
      : memref<?x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x8x64xf16>, memref<?x8xf32>
  // CHECK: fd.merge %{{.*}}, %{{.*}} sinks %[[S]] : memref<8xf32> into %{{.*}}, %{{.*}} :
  fd.merge %po, %pl sinks %s : memref<8xf32> into %out, %lse
      : memref<?x8x3x64xf32>, memref<?x8x3xf32> into memref<?x8x64xf16>, memref<?x8xf32>
  return
}

// CHECK-LABEL: func @alibi
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<8xf32>
func.func @alibi(%q: memref<?x2x8x64xbf16>, %k: memref<?x16x2x64xbf16>, %v: memref<?x16x2x64xbf16>,
                 %lens: memref<?xi32>, %table: memref<?x?xi32>, %a: memref<8xf32>, %s: memref<8xf32>,
                 %out: memref<?x2x8x64xbf16>, %po: memref<?x2x8x3x64xf32>, %pl: memref<?x2x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %{{.*}} : memref<?x?xi32> alibi_slopes %[[A]] : memref<8xf32> sinks %{{.*}} : memref<8xf32> into
  fd.attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> alibi_slopes %a : memref<8xf32> sinks %s : memref<8xf32> into %out
      : memref<?x2x8x64xbf16>, memref<?x16x2x64xbf16>, memref<?x16x2x64xbf16>,
        memref<?xi32> into memref<?x2x8x64xbf16>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} alibi_slopes %[[A]] : memref<8xf32> into
  fd.partial_attention %q, %k, %v, %lens alibi_slopes %a : memref<8xf32> into %po, %pl
      : memref<?x2x8x64xbf16>, memref<?x16x2x64xbf16>, memref<?x16x2x64xbf16>,
        memref<?xi32> into memref<?x2x8x3x64xf32>, memref<?x2x8x3xf32>
  return
}

// CHECK-LABEL: func @query_lens
// CHECK-SAME: %[[QL:[a-z0-9]+]]: memref<?xi32>, %{{[a-z0-9]+}}: memref<8xf32>
func.func @query_lens(%q: memref<?x4x8x64xf16>, %k: memref<?x16x2x64xf16>, %v: memref<?x16x2x64xf16>,
                      %lens: memref<?xi32>, %table: memref<?x?xi32>, %a: memref<8xf32>,
                      %ql: memref<?xi32>, %s: memref<8xf32>, %out: memref<?x4x8x64xf16>,
                      %lse: memref<?x4x8xf32>, %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %{{.*}} : memref<?x?xi32> alibi_slopes %{{.*}} : memref<8xf32> query_lens %[[QL]] : memref<?xi32> sinks %{{.*}} : memref<8xf32> into %{{.*}}, %{{.*}} {window_left = 3 : i64} :
  fd.attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> alibi_slopes %a : memref<8xf32> query_lens %ql : memref<?xi32> sinks %s : memref<8xf32> into %out, %lse {window_left = 3}
      : memref<?x4x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>,
        memref<?xi32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %{{.*}} : memref<?x?xi32> alibi_slopes %{{.*}} : memref<8xf32> query_lens %[[QL]] : memref<?xi32> into
  fd.partial_attention %q, %k, %v, %lens block_table %table : memref<?x?xi32> alibi_slopes %a : memref<8xf32> query_lens %ql : memref<?xi32> into %po, %pl
      : memref<?x4x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} query_lens %[[QL]] : memref<?xi32> into
  fd.partial_attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> into %po, %pl
      : memref<?x4x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  // CHECK: fd.merge %{{.*}}, %{{.*}} sinks %{{.*}} : memref<8xf32> query_lens %[[QL]] : memref<?xi32> into %{{.*}}, %{{.*}} :
  fd.merge %po, %pl sinks %s : memref<8xf32> query_lens %ql : memref<?xi32> into %out, %lse
      : memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  // CHECK: fd.merge %{{.*}}, %{{.*}} query_lens %[[QL]] : memref<?xi32> into %{{.*}} :
  fd.merge %po, %pl query_lens %ql : memref<?xi32> into %out
      : memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32> into memref<?x4x8x64xf16>
  return
}

// CHECK-LABEL: func @query_lens_static_batch
// CHECK: fd.attention {{.*}} query_lens %{{.*}} : memref<2xi32> into
func.func @query_lens_static_batch(%q: memref<2x8x64xf32>, %k: memref<2x?x8x64xf32>, %v: memref<2x?x8x64xf32>,
                                   %lens: memref<2xi32>, %ql: memref<2xi32>, %out: memref<2x8x64xf32>) {
  fd.attention %q, %k, %v, %lens query_lens %ql : memref<2xi32> into %out
      : memref<2x8x64xf32>, memref<2x?x8x64xf32>, memref<2x?x8x64xf32>,
        memref<2xi32> into memref<2x8x64xf32>
  return
}

// MLA's absorbed decode: one latent cache of 576 columns, the values its
// first 512 (no value cache), paged, fp8 with a per-token k_scale.
// CHECK-LABEL: func @latent_paged_fp8
// CHECK-SAME: (%[[Q:.*]]: memref<?x2x16x576xbf16>, %[[KV:.*]]: memref<?x64x1x576xf8E4M3FN>, %[[L:.*]]: memref<?xi32>, %[[T:.*]]: memref<?x?xi32>, %[[S:.*]]: memref<?x64x1xf32>, %[[O:.*]]: memref<?x2x16x512xbf16>, %[[LSE:.*]]: memref<?x2x16xf32>)
func.func @latent_paged_fp8(%q: memref<?x2x16x576xbf16>,
                            %kv: memref<?x64x1x576xf8E4M3FN>,
                            %lens: memref<?xi32>, %table: memref<?x?xi32>,
                            %scale: memref<?x64x1xf32>,
                            %out: memref<?x2x16x512xbf16>,
                            %lse: memref<?x2x16xf32>) {
  // CHECK: fd.attention %[[Q]], %[[KV]], %[[L]] block_table %[[T]] : memref<?x?xi32> k_scale %[[S]] : memref<?x64x1xf32> into %[[O]], %[[LSE]] {scale = 0.0721687824 : f32} :
  // CHECK-SAME: memref<?x2x16x576xbf16>, memref<?x64x1x576xf8E4M3FN>, memref<?xi32> into memref<?x2x16x512xbf16>, memref<?x2x16xf32>
  fd.attention %q, %kv, %lens block_table %table : memref<?x?xi32>
      k_scale %scale : memref<?x64x1xf32> into %out, %lse {scale = 0.0721687824 : f32}
      : memref<?x2x16x576xbf16>, memref<?x64x1x576xf8E4M3FN>, memref<?xi32>
        into memref<?x2x16x512xbf16>, memref<?x2x16xf32>
  return
}

// Values apart from keys: D = 192, D_v = 128, each in its own cache.
// CHECK-LABEL: func @value_dim_apart
// CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} :
// CHECK-SAME: memref<1x8x192xf16>, memref<1x?x2x192xf16>, memref<1x?x2x128xf16>, memref<1xi32> into memref<1x8x4x128xf32>, memref<1x8x4xf32>
func.func @value_dim_apart(%q: memref<1x8x192xf16>, %k: memref<1x?x2x192xf16>,
                           %v: memref<1x?x2x128xf16>, %lens: memref<1xi32>,
                           %po: memref<1x8x4x128xf32>, %pl: memref<1x8x4xf32>) {
  fd.partial_attention %q, %k, %v, %lens into %po, %pl
      : memref<1x8x192xf16>, memref<1x?x2x192xf16>, memref<1x?x2x128xf16>,
        memref<1xi32> into memref<1x8x4x128xf32>, memref<1x8x4xf32>
  return
}

// CHECK-LABEL: func @kv_shard
// CHECK-SAME: %[[RANK:[a-z0-9]+]]: memref<1xi32>
func.func @kv_shard(%q: memref<?x4x8x64xf16>, %k: memref<?x?x2x64xf16>, %v: memref<?x?x2x64xf16>,
                    %lens: memref<?xi32>, %ql: memref<?xi32>, %rank: memref<1xi32>,
                    %out: memref<?x4x8x64xf16>, %lse: memref<?x4x8xf32>,
                    %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} query_lens %{{.*}} : memref<?xi32> kv_shard_rank %[[RANK]] : memref<1xi32> into %{{.*}}, %{{.*}} {kv_shard = #fd.kv_shard<world = 4, interleave = 16>, window_left = 3 : i64} :
  fd.attention %q, %k, %v, %lens query_lens %ql : memref<?xi32> kv_shard_rank %rank : memref<1xi32> into %out, %lse {kv_shard = #fd.kv_shard<world = 4, interleave = 16>, window_left = 3}
      : memref<?x4x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} kv_shard_rank %[[RANK]] : memref<1xi32> into %{{.*}}, %{{.*}} {kv_shard = #fd.kv_shard<world = 2, interleave = 1>} :
  fd.partial_attention %q, %k, %v, %lens kv_shard_rank %rank : memref<1xi32> into %po, %pl {kv_shard = #fd.kv_shard<world = 2, interleave = 1>}
      : memref<?x4x8x64xf16>, memref<?x?x2x64xf16>, memref<?x?x2x64xf16>,
        memref<?xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}

// CHECK-LABEL: func @top_k_lists
func.func @top_k_lists(%q: memref<?x8x64xf32>, %k: memref<?x1x2x64xf32>, %v: memref<?x1x2x64xf32>,
                       %lens: memref<?xi32>, %lists: memref<?x16xi32>, %out: memref<?x8x64xf32>,
                       %po: memref<?x8x2x64xf32>, %pl: memref<?x8x2xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %{{.*}} : memref<?x16xi32> into %{{.*}} {block_table_holes} :
  fd.attention %q, %k, %v, %lens block_table %lists : memref<?x16xi32> into %out {block_table_holes}
      : memref<?x8x64xf32>, memref<?x1x2x64xf32>, memref<?x1x2x64xf32>, memref<?xi32> into memref<?x8x64xf32>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} block_table %{{.*}} : memref<?x16xi32> into %{{.*}}, %{{.*}} {block_table_holes} :
  fd.partial_attention %q, %k, %v, %lens block_table %lists : memref<?x16xi32> into %po, %pl {block_table_holes}
      : memref<?x8x64xf32>, memref<?x1x2x64xf32>, memref<?x1x2x64xf32>, memref<?xi32> into memref<?x8x2x64xf32>, memref<?x8x2xf32>
  return
}

// A shared prefix (cascade): the cache is one sequence (batch 1, or a block
// table of one row) and seq_lens [1] its length; suffix_lens, one per query
// sequence, is printed after kv_shard_rank and round-trips on both ops,
// beside a window, an lse and a block table.
// CHECK-LABEL: func @shared_prefix
// CHECK-SAME: %[[L:[a-z0-9]+]]: memref<1xi32>, %[[S:[a-z0-9]+]]: memref<?xi32>
func.func @shared_prefix(%q: memref<?x4x8x64xf16>, %k: memref<1x?x2x64xf16>, %v: memref<1x?x2x64xf16>,
                         %lens: memref<1xi32>, %suffix: memref<?xi32>,
                         %out: memref<?x4x8x64xf16>, %lse: memref<?x4x8xf32>,
                         %pages: memref<?x16x2x64xf16>, %table: memref<1x?xi32>,
                         %po: memref<?x4x8x3x64xf32>, %pl: memref<?x4x8x3xf32>) {
  // CHECK: fd.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[L]] suffix_lens %[[S]] : memref<?xi32> into %{{.*}}, %{{.*}} {window_left = 64 : i64} :
  // CHECK-SAME: memref<?x4x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>, memref<1xi32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  fd.attention %q, %k, %v, %lens suffix_lens %suffix : memref<?xi32> into %out, %lse {window_left = 64}
      : memref<?x4x8x64xf16>, memref<1x?x2x64xf16>, memref<1x?x2x64xf16>,
        memref<1xi32> into memref<?x4x8x64xf16>, memref<?x4x8xf32>
  // CHECK: fd.partial_attention %{{.*}}, %{{.*}}, %{{.*}}, %[[L]] block_table %{{.*}} : memref<1x?xi32> suffix_lens %[[S]] : memref<?xi32> into %{{.*}}, %{{.*}} :
  // CHECK-SAME: memref<?x4x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>, memref<1xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  fd.partial_attention %q, %pages, %pages, %lens block_table %table : memref<1x?xi32> suffix_lens %suffix : memref<?xi32> into %po, %pl
      : memref<?x4x8x64xf16>, memref<?x16x2x64xf16>, memref<?x16x2x64xf16>,
        memref<1xi32> into memref<?x4x8x3x64xf32>, memref<?x4x8x3xf32>
  return
}
