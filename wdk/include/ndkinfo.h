/* ndkinfo.h (libndk WDK kit): the kit's types, then libndk's ndk/ndkinfo.h. */
#ifndef NDKWDK_NDKINFO_H
#define NDKWDK_NDKINFO_H
#include <ntdef.h>
#include <ndk/ndkinfo.h>
#endif
