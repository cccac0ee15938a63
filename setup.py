from glob import glob

from setuptools import find_packages, setup

package_name = "payload_estimation"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml", "README.md", "LICENSE"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/config/robots", glob("config/robots/*")),
        ("share/" + package_name + "/examples", glob("examples/*")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="payload_estimation developers",
    maintainer_email="payload-estimation@users.noreply.github.com",
    description="Payload mass/CoM estimation from joint torques and payload-aware collision detection "
    "for torque-sensing arms (KUKA LWR 4+, LBR iiwa).",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "payload-estimation = payload_estimation.cli:main",
            "sim_node = payload_estimation.ros.sim_node:main",
            "payload_sampler = payload_estimation.ros.sampler_node:main",
            "payload_estimator = payload_estimation.ros.estimator_node:main",
            "collision_monitor = payload_estimation.ros.monitor_node:main",
            "bringup = payload_estimation.ros.bringup:main",
        ],
    },
)
