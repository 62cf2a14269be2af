/* ifdef.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_IFDEF_H
#define NDKWDK_IFDEF_H
#include <ndkwdk/ws2.h>
#endif
