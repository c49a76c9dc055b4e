//! memory_viz's lists, the operator and node names, and whose code a file is.

use super::*;

#[test]
fn operators_and_nodes_from_cpp_frames() {
    let op = |s| aten_op(s);
    assert_eq!(op("at::_ops::addmm::call(at::Tensor const&)"), Some("aten::addmm".into()));
    assert_eq!(op("at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)"), Some("aten::div".into()));
    assert_eq!(op("at::_ops::div_Scalar::redispatch(c10::DispatchKeySet)"), Some("aten::div".into()));
    assert_eq!(op("at::_ops::index_select::call(at::Tensor const&, long)"), Some("aten::index_select".into()));
    assert_eq!(op("at::_ops::resize_::call(at::Tensor const&)"), Some("aten::resize_".into()));
    assert_eq!(op("at::_ops::_log_softmax::call(at::Tensor const&)"), Some("aten::_log_softmax".into()));
    assert_eq!(op("at::_ops::mm_out::call(at::Tensor const&)"), Some("aten::mm".into()));
    assert_eq!(op("at::native::add(at::Tensor const&)"), None);
    let node = |s| autograd_node(s);
    assert_eq!(
        node("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"),
        Some("MmBackward0".into())
    );
    assert_eq!(
        node("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"),
        Some("AccumulateGrad".into())
    );
    assert_eq!(node("torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"), None);
}

#[test]
fn memory_viz_hides_what_its_lists_name() {
    assert!(!viz_keeps("torch::unwind::unwind()", "??"));
    assert!(!viz_keeps("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"));
    assert!(!viz_keeps("_PyEval_EvalFrameDefault", "??"));
    assert!(!viz_keeps("__libc_start_main", "??"));
    assert!(!viz_keeps("wrap_kernel", "aten/src/ATen/core/boxing/KernelFunction.h"));
    assert!(!viz_keeps("x", "build/aten/src/ATen/RegisterCUDA.cpp"));
    assert!(!viz_keeps("do_call_core", "/usr/local/src/conda/python-3.10.14/Python/ceval.c"));
    assert!(viz_keeps(
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
        "CUDACachingAllocator.cpp"
    ));
    assert!(viz_keeps("forward", "/home/me/model.py"));
    // The file test is on the path as written: a bare `RegisterCUDA.cpp` has no slash.
    assert!(viz_keeps("x", "RegisterCUDA.cpp"));
}

#[test]
fn whose_code_a_file_is() {
    assert!(is_torch("/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py"));
    assert!(is_stdlib("/usr/lib/python3.11/threading.py"));
    assert!(!is_stdlib("/usr/lib/python3.11/site-packages/transformers/trainer.py"));
    assert!(is_package("/root/env/lib/python3.10/site-packages/transformers/models/llama/modeling_llama.py"));
    assert!(!is_package("/home/me/assignment1/cs336_basics/transformer.py"));
    assert!(is_python("<ipython-input-3-1b2c>"));
    assert!(!is_python("??") && !is_python("CUDACachingAllocator.cpp") && !is_python(""));
    assert_eq!(module_of("/x/site-packages/torch/nn/modules/linear.py"), "torch.nn.modules.linear");
}
