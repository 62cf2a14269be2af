/*
 * wdm.h (libndk WDK kit) - the kernel routines of the Windows Driver Model
 * that NDK consumer drivers use, implemented in user space by libndk-wdk
 * (docs/porting.md lists every routine, supported or refused).
 */
#ifndef NDKWDK_WDM_H
#define NDKWDK_WDM_H

#include <ntdef.h>
#include <ntstatus.h>
#include <ndkwdk/ke.h>
#include <ndkwdk/ex.h>
#include <ndkwdk/rtl.h>
#include <ndkwdk/io.h>
#include <ndkwdk/dbg.h>

#endif /* NDKWDK_WDM_H */
