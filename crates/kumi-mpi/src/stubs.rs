//! Every function MPICH's `libmpich.so.12` exports that kumi does not
//! implement yet (made from the two libraries' symbol lists), so any
//! MPICH-built binary loads. Each fails naming itself (see
//! `crate::unsupported`); none fakes a success. Implementing one removes its
//! stub here (the coverage test checks the README agrees).
#![allow(missing_docs)]

use std::ffi::c_int;

#[no_mangle]
pub extern "C" fn MPII_Comm_get_attr() -> c_int {
    crate::unsupported("MPII_Comm_get_attr")
}
#[no_mangle]
pub extern "C" fn MPII_Comm_set_attr() -> c_int {
    crate::unsupported("MPII_Comm_set_attr")
}
#[no_mangle]
pub extern "C" fn MPII_Errhandler_set_cxx() -> c_int {
    crate::unsupported("MPII_Errhandler_set_cxx")
}
#[no_mangle]
pub extern "C" fn MPII_Grequest_set_lang_f77() -> c_int {
    crate::unsupported("MPII_Grequest_set_lang_f77")
}
#[no_mangle]
pub extern "C" fn MPII_Keyval_set_proxy() -> c_int {
    crate::unsupported("MPII_Keyval_set_proxy")
}
#[no_mangle]
pub extern "C" fn MPII_Op_set_cxx() -> c_int {
    crate::unsupported("MPII_Op_set_cxx")
}
#[no_mangle]
pub extern "C" fn MPII_Type_get_attr() -> c_int {
    crate::unsupported("MPII_Type_get_attr")
}
#[no_mangle]
pub extern "C" fn MPII_Type_set_attr() -> c_int {
    crate::unsupported("MPII_Type_set_attr")
}
#[no_mangle]
pub extern "C" fn MPII_Win_get_attr() -> c_int {
    crate::unsupported("MPII_Win_get_attr")
}
#[no_mangle]
pub extern "C" fn MPII_Win_set_attr() -> c_int {
    crate::unsupported("MPII_Win_set_attr")
}
#[no_mangle]
pub extern "C" fn MPIR_Err_create_code() -> c_int {
    crate::unsupported("MPIR_Err_create_code")
}
#[no_mangle]
pub extern "C" fn MPIR_Err_return_comm() -> c_int {
    crate::unsupported("MPIR_Err_return_comm")
}
#[no_mangle]
pub extern "C" fn MPIR_Err_return_win() -> c_int {
    crate::unsupported("MPIR_Err_return_win")
}
#[no_mangle]
pub extern "C" fn MPIX_Comm_agree() -> c_int {
    crate::unsupported("MPIX_Comm_agree")
}
#[no_mangle]
pub extern "C" fn MPIX_Comm_failure_ack() -> c_int {
    crate::unsupported("MPIX_Comm_failure_ack")
}
#[no_mangle]
pub extern "C" fn MPIX_Comm_failure_get_acked() -> c_int {
    crate::unsupported("MPIX_Comm_failure_get_acked")
}
#[no_mangle]
pub extern "C" fn MPIX_Comm_revoke() -> c_int {
    crate::unsupported("MPIX_Comm_revoke")
}
#[no_mangle]
pub extern "C" fn MPIX_Comm_shrink() -> c_int {
    crate::unsupported("MPIX_Comm_shrink")
}
#[no_mangle]
pub extern "C" fn MPIX_Delete_error_class() -> c_int {
    crate::unsupported("MPIX_Delete_error_class")
}
#[no_mangle]
pub extern "C" fn MPIX_Delete_error_code() -> c_int {
    crate::unsupported("MPIX_Delete_error_code")
}
#[no_mangle]
pub extern "C" fn MPIX_Delete_error_string() -> c_int {
    crate::unsupported("MPIX_Delete_error_string")
}
#[no_mangle]
pub extern "C" fn MPIX_GPU_query_support() -> c_int {
    crate::unsupported("MPIX_GPU_query_support")
}
#[no_mangle]
pub extern "C" fn MPIX_Grequest_class_allocate() -> c_int {
    crate::unsupported("MPIX_Grequest_class_allocate")
}
#[no_mangle]
pub extern "C" fn MPIX_Grequest_class_create() -> c_int {
    crate::unsupported("MPIX_Grequest_class_create")
}
#[no_mangle]
pub extern "C" fn MPIX_Grequest_start() -> c_int {
    crate::unsupported("MPIX_Grequest_start")
}
#[no_mangle]
pub extern "C" fn MPIX_Query_cuda_support() -> c_int {
    crate::unsupported("MPIX_Query_cuda_support")
}
#[no_mangle]
pub extern "C" fn MPIX_Query_hip_support() -> c_int {
    crate::unsupported("MPIX_Query_hip_support")
}
#[no_mangle]
pub extern "C" fn MPIX_Query_ze_support() -> c_int {
    crate::unsupported("MPIX_Query_ze_support")
}
#[no_mangle]
pub extern "C" fn MPI_Close_port() -> c_int {
    crate::unsupported("MPI_Close_port")
}
#[no_mangle]
pub extern "C" fn MPI_Comm_accept() -> c_int {
    crate::unsupported("MPI_Comm_accept")
}
#[no_mangle]
pub extern "C" fn MPI_Comm_connect() -> c_int {
    crate::unsupported("MPI_Comm_connect")
}
#[no_mangle]
pub extern "C" fn MPI_Comm_join() -> c_int {
    crate::unsupported("MPI_Comm_join")
}
#[no_mangle]
pub extern "C" fn MPI_Comm_spawn() -> c_int {
    crate::unsupported("MPI_Comm_spawn")
}
#[no_mangle]
pub extern "C" fn MPI_Comm_spawn_multiple() -> c_int {
    crate::unsupported("MPI_Comm_spawn_multiple")
}
#[no_mangle]
pub extern "C" fn MPI_Lookup_name() -> c_int {
    crate::unsupported("MPI_Lookup_name")
}
#[no_mangle]
pub extern "C" fn MPI_Open_port() -> c_int {
    crate::unsupported("MPI_Open_port")
}
#[no_mangle]
pub extern "C" fn MPI_Publish_name() -> c_int {
    crate::unsupported("MPI_Publish_name")
}
#[no_mangle]
pub extern "C" fn MPI_Register_datarep() -> c_int {
    crate::unsupported("MPI_Register_datarep")
}
#[no_mangle]
pub extern "C" fn MPI_Register_datarep_c() -> c_int {
    crate::unsupported("MPI_Register_datarep_c")
}
#[no_mangle]
pub extern "C" fn MPI_Unpublish_name() -> c_int {
    crate::unsupported("MPI_Unpublish_name")
}
#[no_mangle]
pub extern "C" fn PMPIX_Comm_agree() -> c_int {
    crate::unsupported("MPIX_Comm_agree")
}
#[no_mangle]
pub extern "C" fn PMPIX_Comm_failure_ack() -> c_int {
    crate::unsupported("MPIX_Comm_failure_ack")
}
#[no_mangle]
pub extern "C" fn PMPIX_Comm_failure_get_acked() -> c_int {
    crate::unsupported("MPIX_Comm_failure_get_acked")
}
#[no_mangle]
pub extern "C" fn PMPIX_Comm_revoke() -> c_int {
    crate::unsupported("MPIX_Comm_revoke")
}
#[no_mangle]
pub extern "C" fn PMPIX_Comm_shrink() -> c_int {
    crate::unsupported("MPIX_Comm_shrink")
}
#[no_mangle]
pub extern "C" fn PMPIX_Delete_error_class() -> c_int {
    crate::unsupported("MPIX_Delete_error_class")
}
#[no_mangle]
pub extern "C" fn PMPIX_Delete_error_code() -> c_int {
    crate::unsupported("MPIX_Delete_error_code")
}
#[no_mangle]
pub extern "C" fn PMPIX_Delete_error_string() -> c_int {
    crate::unsupported("MPIX_Delete_error_string")
}
#[no_mangle]
pub extern "C" fn PMPIX_GPU_query_support() -> c_int {
    crate::unsupported("MPIX_GPU_query_support")
}
#[no_mangle]
pub extern "C" fn PMPIX_Grequest_class_allocate() -> c_int {
    crate::unsupported("MPIX_Grequest_class_allocate")
}
#[no_mangle]
pub extern "C" fn PMPIX_Grequest_class_create() -> c_int {
    crate::unsupported("MPIX_Grequest_class_create")
}
#[no_mangle]
pub extern "C" fn PMPIX_Grequest_start() -> c_int {
    crate::unsupported("MPIX_Grequest_start")
}
#[no_mangle]
pub extern "C" fn PMPIX_Query_cuda_support() -> c_int {
    crate::unsupported("MPIX_Query_cuda_support")
}
#[no_mangle]
pub extern "C" fn PMPIX_Query_hip_support() -> c_int {
    crate::unsupported("MPIX_Query_hip_support")
}
#[no_mangle]
pub extern "C" fn PMPIX_Query_ze_support() -> c_int {
    crate::unsupported("MPIX_Query_ze_support")
}
#[no_mangle]
pub extern "C" fn PMPI_Close_port() -> c_int {
    crate::unsupported("MPI_Close_port")
}
#[no_mangle]
pub extern "C" fn PMPI_Comm_accept() -> c_int {
    crate::unsupported("MPI_Comm_accept")
}
#[no_mangle]
pub extern "C" fn PMPI_Comm_connect() -> c_int {
    crate::unsupported("MPI_Comm_connect")
}
#[no_mangle]
pub extern "C" fn PMPI_Comm_join() -> c_int {
    crate::unsupported("MPI_Comm_join")
}
#[no_mangle]
pub extern "C" fn PMPI_Comm_spawn() -> c_int {
    crate::unsupported("MPI_Comm_spawn")
}
#[no_mangle]
pub extern "C" fn PMPI_Comm_spawn_multiple() -> c_int {
    crate::unsupported("MPI_Comm_spawn_multiple")
}
#[no_mangle]
pub extern "C" fn PMPI_Lookup_name() -> c_int {
    crate::unsupported("MPI_Lookup_name")
}
#[no_mangle]
pub extern "C" fn PMPI_Open_port() -> c_int {
    crate::unsupported("MPI_Open_port")
}
#[no_mangle]
pub extern "C" fn PMPI_Publish_name() -> c_int {
    crate::unsupported("MPI_Publish_name")
}
#[no_mangle]
pub extern "C" fn PMPI_Register_datarep() -> c_int {
    crate::unsupported("MPI_Register_datarep")
}
#[no_mangle]
pub extern "C" fn PMPI_Register_datarep_c() -> c_int {
    crate::unsupported("MPI_Register_datarep_c")
}
#[no_mangle]
pub extern "C" fn PMPI_Unpublish_name() -> c_int {
    crate::unsupported("MPI_Unpublish_name")
}
#[no_mangle]
pub extern "C" fn QMPI_Get_calling_address() -> c_int {
    crate::unsupported("QMPI_Get_calling_address")
}
#[no_mangle]
pub extern "C" fn QMPI_Get_function() -> c_int {
    crate::unsupported("QMPI_Get_function")
}
#[no_mangle]
pub extern "C" fn QMPI_Get_tool_storage() -> c_int {
    crate::unsupported("QMPI_Get_tool_storage")
}
#[no_mangle]
pub extern "C" fn QMPI_Register_function() -> c_int {
    crate::unsupported("QMPI_Register_function")
}
#[no_mangle]
pub extern "C" fn QMPI_Register_tool_name() -> c_int {
    crate::unsupported("QMPI_Register_tool_name")
}
#[no_mangle]
pub extern "C" fn QMPI_Register_tool_storage() -> c_int {
    crate::unsupported("QMPI_Register_tool_storage")
}
