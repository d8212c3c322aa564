! A function kumi does not implement, called from Fortran: the job must end
! naming it (errors are fatal by default), never run on with a made-up port.
      program unsupported
      implicit none
      include 'mpif.h'
      integer ierr
      character*(MPI_MAX_PORT_NAME) port
      call MPI_INIT(ierr)
      call MPI_OPEN_PORT(MPI_INFO_NULL, port, ierr)
      print *, 'returned from MPI_OPEN_PORT with', ierr
      call MPI_FINALIZE(ierr)
      end
