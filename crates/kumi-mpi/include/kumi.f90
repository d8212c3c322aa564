! kumi.f90: the `kumi` module, kumi's own calls for Fortran programs linked
! with kumi's libmpi: the checkpoint calls of kumi.h, as functions returning
! MPI_SUCCESS or an MPI error code (see kumi.h and the README, "Checkpoint
! and restart").
!
!   use kumi
!   real(8), target :: u(n)
!   integer(8), target :: step
!   integer(c_int) :: ierr, restored, due
!   ierr = kumi_ckpt_register(c_loc(u), int(8 * n, c_size_t))
!   ierr = kumi_ckpt_register(c_loc(step), 8_c_size_t)
!   ierr = kumi_ckpt_restore(restored)
!   do while (step < steps)
!     ... compute, communicate ...
!     ierr = kumi_ckpt_due(due)
!     if (due /= 0) ierr = kumi_ckpt_save()
!   end do
!
! Registered variables need the TARGET attribute and must stay where they
! are (allocated, not moved) while the job runs.
module kumi
  use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_size_t, c_long_long, c_loc
  implicit none
  private
  public :: kumi_ckpt_register, kumi_ckpt_due, kumi_ckpt_save, &
            kumi_ckpt_restarting, kumi_ckpt_restore, kumi_ckpt_epoch
  public :: c_int, c_ptr, c_size_t, c_long_long, c_loc
  interface
    integer(c_int) function kumi_ckpt_register(base, bytes) bind(C, name="kumi_ckpt_register")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: base
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function kumi_ckpt_due(flag) bind(C, name="kumi_ckpt_due")
      import :: c_int
      integer(c_int), intent(out) :: flag
    end function
    integer(c_int) function kumi_ckpt_save() bind(C, name="kumi_ckpt_save")
      import :: c_int
    end function
    integer(c_int) function kumi_ckpt_restarting(flag) bind(C, name="kumi_ckpt_restarting")
      import :: c_int
      integer(c_int), intent(out) :: flag
    end function
    integer(c_int) function kumi_ckpt_restore(restored) bind(C, name="kumi_ckpt_restore")
      import :: c_int
      integer(c_int), intent(out) :: restored
    end function
    integer(c_int) function kumi_ckpt_epoch(epoch) bind(C, name="kumi_ckpt_epoch")
      import :: c_int, c_long_long
      integer(c_long_long), intent(out) :: epoch
    end function
  end interface
end module kumi
